"""How the CLI shows a pre-cache job: a live progress bar, a per-host table, a summary; and
any API object as JSON or YAML for scripts (:func:`machine_readable`).

Every function takes the job as the API returns it (``GET .../images/jobs/{id}``): ``state``,
``total_hosts``, ``hosts_reported``, ``counts``, ``distribution``, ``terms`` and
``next_start_at`` (a ``scheduled`` job waits for its window until then) and, per host,
``images`` with ``state``, ``reason``, ``bytes_downloaded``, ``download_path``,
``fallback_reason`` and ``source_host``.
"""

from __future__ import annotations

import datetime
import json
from typing import Any, TextIO

import prettytable
import yaml

#: Per-image states that make a job's outcome a failure for the exit status.
FAILED_STATES = ("error",)
_STATES = ("cached", "existing", "error", "unsupported", "skipped", "pending")
#: Per-image outcomes no later pass changes.
_FINAL = _STATES[:-1]
#: A host not called yet because the image service's download slots are taken.
WAITING = "waiting"
#: A host that was away: it gets the job's images when it comes back (catch-up).
PENDING = "pending"
#: How the reason of a host ``waiting`` for a peer of its group starts (peer distribution).
PEER_WAIT = "for a peer"
#: A job waiting for its window (its terms' ``not_before`` or daily window).
SCHEDULED = "scheduled"
#: How a job's terms are named in a summary, in the API's order.
_TERM_LABELS = (("not_before", "not before"), ("window", "window"), ("deadline", "deadline"),
                ("parallelism", "parallelism"), ("origin_downloads", "origin downloads"),
                ("host_bytes_per_second", "host rate"), ("job_bytes_per_second", "job rate"),
                ("priority", "priority"))


def job_state(job: dict[str, Any]) -> str:
    """The job's state; a ``scheduled`` one says until when it waits:
    ``scheduled (waiting for its window until T)``."""
    state = str(job["state"])
    if state != SCHEDULED:
        return state
    until = job.get("next_start_at")
    return f"{state} (waiting for its window" + (f" until {until})" if until else ")")


def terms_text(terms: dict[str, Any] | None) -> str:
    """A job's terms in one line (``window 22:00-05:00 Europe/Paris, host rate 8.0 MiB/s,
    priority 80``), or ``""`` without terms."""
    parts = []
    for key, label in _TERM_LABELS:
        value = (terms or {}).get(key)
        if value is None:
            continue
        if key == "window" and isinstance(value, dict):
            value = f"{value.get('start')}-{value.get('end')} {value.get('timezone')}"
        elif key.endswith("bytes_per_second"):
            value = f"{human_bytes(int(value))}/s"
        parts.append(f"{label} {value}")
    return ", ".join(parts)


def _hosts_in(job: dict[str, Any], state: str) -> int:
    """Hosts with an image in ``state``: counted from the per-host results when the job has
    them (``jobs show``, ``--wait``), else estimated from the per-image count divided by the
    job's images, rounded up (a job read without its hosts)."""
    hosts = job.get("hosts")
    if hosts is not None:
        return sum(any(i.get("state") == state for i in h.get("images") or []) for h in hosts)
    counts = job.get("counts") or {}
    images = max(1, len(job.get("image_ids") or []))
    return -(-int(counts.get(state) or 0) // images)


def _hosts_waiting_for_peers(job: dict[str, Any]) -> int:
    """Hosts waiting for a peer of their group to hold an image (peer distribution), told
    apart by their reason; 0 for a job read without its hosts."""
    return sum(any(i.get("state") == WAITING and str(i.get("reason") or "").startswith(
        PEER_WAIT) for i in h.get("images") or []) for h in job.get("hosts") or [])


def hosts_in_interim_states(job: dict[str, Any]) -> str:
    """``3 waiting for a download slot, 1 waiting for a peer, 2 pending catch-up until T``,
    or ``""`` when no host waits for a slot (origin protection), for a peer (peer
    distribution) or to come back (catch-up)."""
    parts = []
    for_peers = _hosts_waiting_for_peers(job)
    waiting = _hosts_in(job, WAITING) - for_peers
    if waiting:
        parts.append(f"{waiting} waiting for a download slot")
    if for_peers:
        parts.append(f"{for_peers} waiting for a peer")
    pending = _hosts_in(job, PENDING)
    if pending:
        until = job.get("catch_up_until")
        parts.append(f"{pending} pending catch-up" + (f" until {until}" if until else ""))
    return ", ".join(parts)


class ProgressBar:
    """``[#########.........]  12/40 hosts  running  (20 cached)  3 waiting for a download
    slot`` on ``stream``, redrawn in place on a terminal, one line per change otherwise."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream = stream
        self.width = width
        self.tty = stream.isatty()
        self._last: str | None = None

    def update(self, job: dict[str, Any]) -> None:
        total = int(job.get("total_hosts") or 0)
        done = int(job.get("hosts_reported") or 0)
        filled = self.width if total == 0 else self.width * done // total
        counts = job.get("counts") or {}
        detail = ", ".join(f"{counts.get(s, 0)} {s}" for s in _FINAL if counts.get(s))
        line = (f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} hosts  "
                f"{job_state(job)}" + (f"  ({detail})" if detail else ""))
        interim = hosts_in_interim_states(job)
        if interim:
            line += "  " + interim
        if line == self._last:
            return
        self._last = line
        if self.tty:
            self.stream.write("\r\033[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._last is not None:
            self.stream.write("\n")
            self.stream.flush()


def _cell(image: dict[str, Any] | None) -> str:
    if image is None:
        return "-"
    state = str(image["state"])
    if state in ("skipped", PENDING, WAITING) and image.get("reason"):
        return f"{state} ({image['reason']})"
    if state == "error":
        return "error *"
    # The path is news when it is the direct one, or a fallback from it; a plain download
    # from the image source (HTTP, or the demo's local directory) stays "cached".
    if image.get("fallback_reason"):
        return f"{state} ({image.get('download_path') or 'http'}) +"
    if image.get("download_path") == "peer":
        return f"{state} \N{LEFTWARDS ARROW} {image.get('source_host') or 'peer'}"
    if image.get("download_path") == "rbd":
        return f"{state} (rbd)"
    return state


def job_table(job: dict[str, Any], image_names: dict[str, str] | None = None) -> str:
    """One row per host, one column per image (a download from Ceph shows ``(rbd)``, one
    from a peer ``\N{LEFTWARDS ARROW} <peer>``, one that fell back from either ``(http) +``),
    plus the bytes each host downloaded; the reasons of errors follow the table, marked
    ``*``, then the reasons of fallbacks, marked ``+``."""
    names = image_names or {}
    image_ids = list(job["image_ids"])
    table = prettytable.PrettyTable()
    table.field_names = ["Host", *[names.get(i, i) for i in image_ids], "Downloaded"]
    table.align = "l"
    table.align["Downloaded"] = "r"
    errors, fallbacks = [], []
    for host in job.get("hosts") or []:
        by_image = {i["image_id"]: i for i in host["images"]}
        table.add_row([host["host"], *[_cell(by_image.get(i)) for i in image_ids],
                       human_bytes(int(host.get("bytes_downloaded") or 0))])
        for image_id in image_ids:
            image = by_image.get(image_id)
            where = f"{host['host']}, {names.get(image_id, image_id)}"
            if image is not None and image["state"] in FAILED_STATES:
                errors.append(f"* {where}: {image.get('reason') or 'no reason given'}")
            elif image is not None and image.get("fallback_reason"):
                fallbacks.append(f"+ {where}: {_fallback_from(image)}: "
                                 f"{image['fallback_reason']}")
    return "\n".join([table.get_string(), *errors, *fallbacks])


def _fallback_from(image: dict[str, Any]) -> str:
    """What a fallback left: the peers (their reasons start with ``peer``, ``hash_mismatch``
    or ``no_``), else the direct path from Ceph."""
    reason = str(image.get("fallback_reason"))
    if reason.startswith(("peer", "hash_mismatch", "no_")):
        return "from the image service, not (only) from peers"
    return "over HTTP, not from Ceph"


def job_summary(job: dict[str, Any]) -> str:
    """``Job J on aggregate A: done in 1.2 s, 3 hosts: 4 cached, ... ; 12.0 MiB downloaded``."""
    counts = job.get("counts") or {}
    parts = ", ".join(f"{counts.get(s, 0)} {s}" for s in _STATES
                      if s != "pending" or counts.get(s))  # pending only with catch-up
    elapsed = _elapsed(job.get("started_at"), job.get("finished_at"))
    took = f" in {elapsed:.1f} s" if elapsed is not None else ""
    line = (f"Job {job['id']} on aggregate {job['aggregate_id']}: {job_state(job)}{took}, "
            f"{job.get('total_hosts', 0)} hosts: {parts}; "
            f"{human_bytes(int(job.get('bytes_downloaded') or 0))} downloaded")
    spread = job.get("distribution") or {}
    if spread.get("peer_copies"):
        to_all = spread.get("time_to_all_hosts")
        line += (f"\nOrigin {copies(spread['origin_copies'])} "
                 f"({human_bytes(int(spread['bytes_from_origin']))}), peers "
                 f"{copies(spread['peer_copies'])} ({human_bytes(int(spread['bytes_from_peers']))})"
                 f", offload {spread['offload_percent']:.1f} %"
                 + (f", time to all hosts {to_all:.1f} s" if to_all is not None else ""))
    if job.get("terms"):
        line += f"\nTerms: {terms_text(job['terms'])}"
    if job.get("error"):
        line += f"\nJob error: {job['error']}"
    for_peers = _hosts_waiting_for_peers(job)
    waiting = _hosts_in(job, WAITING) - for_peers
    if for_peers:
        line += (f"\n{for_peers} host(s) waiting for a peer of their group to hold the image "
                 "(peer distribution): called as holders free up")
    if waiting:
        line += (f"\n{waiting} host(s) waiting for a download slot (the image service's "
                 "download limit is reached): called as slots free")
    if counts.get(PENDING):
        line += (f"\n{_hosts_in(job, PENDING)} host(s) pending ({counts[PENDING]} image(s)): "
                 f"they were away; cached when they come back, until "
                 f"{job.get('catch_up_until') or '?'}")
    return line


def job_failed(job: dict[str, Any]) -> bool:
    """Whether the job broke or any image failed on any host (skipped and pending hosts do
    not count)."""
    counts = job.get("counts") or {}
    return (job["state"] not in ("done", "catching_up")
            or any(counts.get(s, 0) for s in FAILED_STATES))


def jobs_table(jobs: list[dict[str, Any]]) -> str:
    table = prettytable.PrettyTable()
    table.field_names = ["Job", "State", "Images", "Hosts", "Errors", "Created"]
    table.align = "l"
    for job in jobs:
        counts = job.get("counts") or {}
        table.add_row([job["id"], job_state(job), len(job["image_ids"]),
                       f"{job.get('hosts_reported', 0)}/{job.get('total_hosts', 0)}",
                       counts.get("error", 0), job.get("created_at") or ""])
    return table.get_string()


def host_cache_table(cache: dict[str, Any]) -> str:
    """A host's image cache (``GET /os-hosts/{host}/image-cache``): a heading, one row per
    image, most recently used first.

    A ``Pinned until`` column appears when an image is pinned (``pinned_until`` not null),
    and a second table lists ``pending_catch_ups``: the jobs whose images the host gets when
    it comes back.
    """
    images = list(cache.get("images") or [])
    reported = cache.get("reported_at")
    heading = (f"Image cache of {cache['host']}: {len(images)} image(s), "
               f"{human_bytes(int(cache.get('usage_bytes') or 0))} on disk, "
               + (f"reported {reported}" if reported else "no report yet"))
    pins = any(i.get("pinned_until") for i in images)
    table = prettytable.PrettyTable()
    table.field_names = ["Image", "Size", "Last used", *(["Pinned until"] if pins else [])]
    table.align = "l"
    table.align["Size"] = "r"
    for image in images:
        table.add_row([image["image_id"], human_bytes(int(image.get("size") or 0)),
                       image.get("last_used") or "",
                       *([image.get("pinned_until") or "-"] if pins else [])])
    parts = [heading, table.get_string()] if images else [heading]
    pending = cache.get("pending_catch_ups")
    if pending:
        catch_ups = prettytable.PrettyTable()
        catch_ups.field_names = ["Pending catch-up: job", "Images", "Until"]
        catch_ups.align = "l"
        for item in pending:
            catch_ups.add_row([item.get("job_id", ""), " ".join(item.get("image_ids") or []),
                               item.get("until") or ""])
        parts.append(catch_ups.get_string())
    return "\n".join(parts)


def machine_readable(data: Any, fmt: str) -> str:
    """``data`` (an object or list as the API returned it) as ``json`` (indented by 2, as
    ``openstack -f json``) or ``yaml``, keys in the API's order, ending with a newline.

    :raises ValueError: for another format.
    """
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    if fmt == "yaml":
        return str(yaml.safe_dump(data, default_flow_style=False, sort_keys=False))
    raise ValueError(f"no machine-readable format {fmt!r}")


def copies(n: int) -> str:
    """``1 copy``, ``2 copies``."""
    return f"{n} copy" if n == 1 else f"{n} copies"


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _elapsed(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        a = datetime.datetime.fromisoformat(start.replace("Z", "+00:00"))
        b = datetime.datetime.fromisoformat(end.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (b - a).total_seconds()
