"""Per-group results of a Tempest run: run, passed, failed, skipped, and why each failure failed.

Run by ``tools/tempest.sh`` with Tempest's venv (python-subunit, testtools)::

    stestr last --subunit | python summary.py SELECTION LISTING

SELECTION is tools/tempest/selection.txt (``regex  # group``: the first matching line names a
test's group), LISTING the ids the run selected (``stestr list``). A test that reported no
result of its own takes the one of its class's ``setUpClass``: Tempest skips a whole class
there (a service not available, a microversion outside the range) and a failure there fails
every test of the class, which the table counts as failed rather than hiding it.
"""

from __future__ import annotations

import re
import sys
from collections import Counter

import subunit
import testtools

CLASS_FIXTURE = re.compile(r"^(?:setUpClass|tearDownClass) \((?P<cls>[\w.]+)\)$")


def strip_attrs(test_id: str) -> str:
    """``a.b.C.test_x[id-...,smoke]`` -> ``a.b.C.test_x``."""
    return test_id.split("[", 1)[0]


def read_groups(path: str) -> list[tuple[re.Pattern[str], str]]:
    """(regex, group) per line of the selection file."""
    groups = []
    with open(path) as f:
        for line in f:
            regex, _, comment = line.partition("#")
            if regex.strip():
                groups.append((re.compile(regex.strip()), comment.strip() or regex.strip()))
    return groups


EXCEPTION_LINE = re.compile(r"^[\w.]+(?:Error|Exception|Failure|Mismatch\w*|Unauthorized|Forbidden"
                            r"|NotFound|BadRequest|Conflict|ServerFault)\b.*")


def exception_line(traceback: str) -> str:
    """The last ``SomeError: message`` line of a traceback, with the response body Tempest's
    exceptions print on their ``Details:`` line after it when there is one."""
    lines = [ln.strip() for ln in traceback.splitlines() if ln.strip()]
    found = [i for i, ln in enumerate(lines) if EXCEPTION_LINE.match(ln)]
    if not found:
        return lines[-1] if lines else ""
    head = lines[found[-1]]
    details = [ln for ln in lines[found[-1] + 1:] if ln.startswith("Details:")]
    return f"{head} {details[0]}" if details else head


def read_results() -> dict[str, tuple[str, str]]:
    """test id (attributes stripped) -> (status, last line of its traceback or skip reason)."""
    results: dict[str, tuple[str, str]] = {}

    def on_test(test: dict[str, object]) -> None:
        details = test["details"]
        assert isinstance(details, dict)
        reason = ""
        if "reason" in details:
            reason = details["reason"].as_text().strip()
        elif "traceback" in details:
            reason = exception_line(details["traceback"].as_text())
        status = str(test["status"])
        results[strip_attrs(str(test["id"]))] = (status, reason[:300])

    stream = subunit.ByteStreamToStreamResult(sys.stdin.buffer, non_subunit_name="stdout")
    result = testtools.StreamToDict(on_test)
    result.startTestRun()
    try:
        stream.run(result)
    finally:
        result.stopTestRun()
    return results


def main() -> None:
    """Print the table, then each failure with its reason, each pass, each skip reason."""
    groups = read_groups(sys.argv[1])
    with open(sys.argv[2]) as f:
        selected = [strip_attrs(ln.strip()) for ln in f if ln.strip().startswith("tempest.")]
    results = read_results()
    class_status: dict[str, tuple[str, str]] = {}
    for test_id, outcome in results.items():
        m = CLASS_FIXTURE.match(test_id)
        if m and (outcome[0] != "success"):
            class_status.setdefault(m.group("cls"), outcome)
    order = list(dict.fromkeys(name for _, name in groups))
    counts = {name: Counter[str]() for name in order}
    failures: list[tuple[str, str, str]] = []
    skips: Counter[tuple[str, str]] = Counter()
    passes: list[tuple[str, str]] = []
    for test_id in selected:
        group = next((name for rx, name in groups if rx.search(test_id)), "other")
        counts.setdefault(group, Counter())
        status, reason = results.get(test_id) or class_status.get(
            test_id.rsplit(".", 1)[0], ("not run", "no result (the worker died?)"))
        if test_id not in results and status == "fail":
            reason = "setUpClass: " + reason
        key = {"success": "passed", "skip": "skipped", "fail": "failed"}.get(status, "failed")
        counts[group][key] += 1
        if key == "failed":
            failures.append((group, test_id, reason))
        elif key == "skipped":
            skips[group, reason] += 1
        else:
            passes.append((group, test_id))
    print("| group | run | passed | failed | skipped |")
    print("|---|---|---|---|---|")
    total: Counter[str] = Counter()
    for group, c in counts.items():
        run = c["passed"] + c["failed"]
        total.update(c)
        print(f"| {group} | {run} | {c['passed']} | {c['failed']} | {c['skipped']} |")
    print(f"| all | {total['passed'] + total['failed']} | {total['passed']} | "
          f"{total['failed']} | {total['skipped']} |")
    for group, test_id, reason in sorted(failures):
        print(f"FAIL [{group}] {test_id}: {reason}")
    for group, test_id in sorted(passes):
        print(f"PASS [{group}] {test_id}")
    for (group, reason), n in sorted(skips.items()):
        print(f"SKIP [{group}] {n} x {reason}")


if __name__ == "__main__":
    main()
