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


def read_results() -> dict[str, tuple[str, str]]:
    """test id (attributes stripped) -> (status, last line of its traceback or skip reason)."""
    results: dict[str, tuple[str, str]] = {}

    def on_test(test: dict[str, object]) -> None:
        details = test["details"]
        assert isinstance(details, dict)
        reason = ""
        for key in ("traceback", "reason"):
            if key in details:
                lines = [ln for ln in details[key].as_text().splitlines() if ln.strip()]
                reason = lines[-1].strip() if lines else ""
                break
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
    """Print the table and the failures."""
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
    print("| group | run | passed | failed | skipped |")
    print("|---|---|---|---|---|")
    total: Counter[str] = Counter()
    for group, c in counts.items():
        run = c["passed"] + c["failed"]
        total.update(c)
        print(f"| {group} | {run} | {c['passed']} | {c['failed']} | {c['skipped']} |")
    print(f"| all | {total['passed'] + total['failed']} | {total['passed']} | "
          f"{total['failed']} | {total['skipped']} |")
    for group, test_id, reason in failures:
        print(f"FAIL [{group}] {test_id}: {reason}")


if __name__ == "__main__":
    main()
