"""A pre-cache job's terms: when it may download and how hard it may pull.

Seed 004 reserves the request body for "information per-request, such as parallelism,
download rate", and its first use case is a rollout "during maintenance windows". A job's
terms are one JSON object, the same in the API's request (each key prefixed ``fleetcache:``),
in the conductor's RPC, in the job's row and in the API's view of the job::

    {"not_before": "2026-11-29T01:00:00Z",
     "window": {"start": "01:00", "end": "05:00", "timezone": "Europe/Paris"},
     "deadline": "2026-11-30T05:00:00Z",
     "parallelism": 10, "origin_downloads": 2,
     "host_bytes_per_second": 8388608, "job_bytes_per_second": 16777216,
     "priority": 50}

Every key is optional; a job without terms runs as before. The operator's global caps stay
the ceiling (:func:`check_terms`): a request never gets more than the configuration allows.

Times: ``not_before`` and ``deadline`` are UTC instants; the daily ``window`` is wall-clock
time in a named IANA time zone (``zoneinfo``), ``end`` before ``start`` spanning midnight.
Outside the window no download starts, and downloads in flight are cut at its end and
resumed in the next one.
"""

from __future__ import annotations

import datetime
import re
import zoneinfo
from collections.abc import Mapping
from typing import Any, NamedTuple, TypedDict

from oslo_config import cfg

from fleetcache.common import exception


class Window(TypedDict):
    """A daily window: ``HH:MM`` or ``HH:MM:SS`` wall-clock times in ``timezone``."""

    start: str
    end: str
    timezone: str


class JobTerms(TypedDict, total=False):
    """What a request may set for its job (every key optional)."""

    not_before: str
    window: Window
    deadline: str
    parallelism: int
    origin_downloads: int
    host_bytes_per_second: int
    job_bytes_per_second: int
    priority: int


#: Every key of :class:`JobTerms`, in the order the API documents them.
KEYS = ("not_before", "window", "deadline", "parallelism", "origin_downloads",
        "host_bytes_per_second", "job_bytes_per_second", "priority")
#: A job's priority without one; higher goes first among jobs waiting for the same slots.
DEFAULT_PRIORITY = 50
MIN_PRIORITY, MAX_PRIORITY = 0, 100
#: The least rate a request may ask: below it a 1 GiB image takes more than a day.
MIN_BYTES_PER_SECOND = 16 * 1024
_CLOCK_RE = re.compile(r"([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?")


class Caps(NamedTuple):
    """The operator's global caps a request stays within (0: no cap)."""

    parallelism: int
    origin_downloads: int
    host_bytes_per_second: int

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> Caps:
        """The caps of ``[image_cache]``: ``precache_concurrency`` (a conductor's host calls
        at once), ``max_concurrent_downloads`` and ``max_download_bytes_per_second``."""
        opts = conf.image_cache
        return cls(opts.precache_concurrency, opts.max_concurrent_downloads,
                   opts.max_download_bytes_per_second)


def parse_instant(value: str) -> datetime.datetime:
    """An ISO 8601 instant with its offset (``Z`` or ``+hh:mm``) as an aware UTC datetime.

    :raises ValueError: not such a string, or one without an offset (a local time is
        ambiguous across conductors).
    """
    parsed = datetime.datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"{value!r} has no time zone offset (add Z for UTC)")
    # Days are added to instants (the next window): keep far from datetime's ends, where
    # astimezone and date arithmetic raise OverflowError.
    if not 2000 <= parsed.year <= 9000:
        raise ValueError(f"{value!r} is not between the years 2000 and 9000")
    return parsed.astimezone(datetime.UTC)


def format_instant(value: datetime.datetime) -> str:
    """``value`` (aware, or naive UTC as the database stores it) as ``...Z``."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    # isoformat keeps the microseconds a request gave: a job never starts early.
    return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def parse_clock(value: str) -> datetime.time:
    """``HH:MM`` or ``HH:MM:SS`` (24 h). :raises ValueError: anything else."""
    match = _CLOCK_RE.fullmatch(value)
    if match is None:
        raise ValueError(f"{value!r} is not HH:MM or HH:MM:SS")
    return datetime.time(int(match[1]), int(match[2]), int(match[3] or 0))


def _zone(name: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(name)
    # OSError: a key naming a directory of the zone database ("Europe") is IsADirectoryError.
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"{name!r} is not a known IANA time zone") from exc


def _invalid(field: str, reason: str) -> exception.InvalidInput:
    return exception.InvalidInput(reason=f"fleetcache:{field}: {reason}")


def check_terms(terms: Mapping[str, Any], caps: Caps,
                now: datetime.datetime | None = None) -> JobTerms:
    """The terms of a request, checked beyond their JSON schema: times that parse, a time zone
    that exists, a window that is not empty, a deadline after both ``now`` and
    ``not_before``, and no limit above the operator's.

    :returns: the terms, normalized (instants as ``...Z``).
    :raises InvalidInput: naming the first bad field and why (the API's 400).
    """
    now = now or datetime.datetime.now(datetime.UTC)
    if not isinstance(terms, Mapping):
        raise exception.InvalidInput(reason="a job's terms are an object")
    checked: dict[str, Any] = {}
    for key in ("not_before", "deadline"):
        if key in terms:
            try:
                checked[key] = format_instant(parse_instant(str(terms[key])))
            except ValueError as exc:
                raise _invalid(key, f"not an ISO 8601 time with an offset: {exc}") from exc
    if "window" in terms:
        window = terms["window"]
        try:
            start, end = parse_clock(window["start"]), parse_clock(window["end"])
            if not isinstance(window["timezone"], str) or len(window["timezone"]) > 64:
                raise ValueError("the time zone is not an IANA name")
            _zone(window["timezone"])
        except (ValueError, KeyError, TypeError) as exc:
            raise _invalid("window", str(exc)) from exc
        if start == end:
            raise _invalid("window", "start and end are the same time (an empty window)")
        checked["window"] = Window(start=window["start"], end=window["end"],
                                   timezone=window["timezone"])
    if "deadline" in checked:
        deadline = parse_instant(checked["deadline"])
        if deadline <= now:
            raise _invalid("deadline", f"{checked['deadline']} is already past")
        if "not_before" in checked and deadline <= parse_instant(checked["not_before"]):
            raise _invalid("deadline", "is not after not_before")
        if next_period(checked, now) is None:
            raise _invalid("deadline", "comes before the window next opens")
    for key, cap, option in (
            ("parallelism", caps.parallelism, "[image_cache] precache_concurrency"),
            ("origin_downloads", caps.origin_downloads,
             "[image_cache] max_concurrent_downloads"),
            ("host_bytes_per_second", caps.host_bytes_per_second,
             "[image_cache] max_download_bytes_per_second")):
        if key in terms:
            value = _integer(terms, key, MIN_BYTES_PER_SECOND if "bytes" in key else 1)
            if cap and value > cap:
                raise _invalid(key, f"{value} is above the operator's limit {cap} ({option})")
            checked[key] = value
    if "job_bytes_per_second" in terms:
        checked["job_bytes_per_second"] = _integer(terms, "job_bytes_per_second",
                                                   MIN_BYTES_PER_SECOND)
    if "priority" in terms:
        checked["priority"] = _integer(terms, "priority", MIN_PRIORITY, MAX_PRIORITY)
    unknown = sorted(set(terms) - set(KEYS))
    if unknown:
        raise _invalid(str(unknown[0])[:64], "is not a term of a pre-cache job")
    result: JobTerms = JobTerms(**checked)  # type: ignore[typeddict-item]
    return result


def _integer(terms: Mapping[str, Any], key: str, least: int, most: int | None = None) -> int:
    """``terms[key]``, an integer within bounds (the API's schema says so too; the conductor
    checks what comes over RPC again)."""
    value = terms[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise _invalid(key, "is not an integer")
    if value < least or (most is not None and value > most):
        bounds = f"at least {least}" if most is None else f"from {least} to {most}"
        raise _invalid(key, f"{value} is out of range: {bounds}")
    return value


def _window_bounds(window: Window, day: datetime.date) -> tuple[datetime.datetime,
                                                                  datetime.datetime]:
    """The window that opens on local ``day``, as aware datetimes."""
    zone = _zone(window["timezone"])
    start, end = parse_clock(window["start"]), parse_clock(window["end"])
    opens = datetime.datetime.combine(day, start, tzinfo=zone)
    closes = datetime.datetime.combine(day + datetime.timedelta(days=1 if end <= start else 0),
                                       end, tzinfo=zone)
    return opens, closes


class Period(NamedTuple):
    """When a job may next download: from ``opens`` until ``closes`` (``None``: no end)."""

    opens: datetime.datetime
    closes: datetime.datetime | None


def next_period(terms: Mapping[str, Any], now: datetime.datetime) -> Period | None:
    """The period in which a job may download that is current at ``now`` (``opens <= now``)
    or comes next; ``None`` when none is left before the deadline.

    A period starts at the latest of ``now``, ``not_before`` and the window's opening, and
    ends at the earliest of the window's close and the deadline.
    """
    now = now.astimezone(datetime.UTC)
    earliest = now
    if terms.get("not_before"):
        earliest = max(earliest, parse_instant(terms["not_before"]))
    deadline = parse_instant(terms["deadline"]) if terms.get("deadline") else None
    window: Window | None = terms.get("window")
    period = Period(earliest, None) if window is None else _daily_period(window, earliest)
    if deadline is not None:
        if period.opens >= deadline:
            return None
        if period.closes is None or period.closes > deadline:
            period = Period(period.opens, deadline)
    return period


def _daily_period(window: Window, earliest: datetime.datetime) -> Period:
    """The daily window's opening that is current at ``earliest`` or comes next."""
    zone = _zone(window["timezone"])
    local_day = earliest.astimezone(zone).date()
    # Yesterday's window may still be open (one that spans midnight); two days on covers a
    # day whose window a DST change made empty.
    for offset in (-1, 0, 1, 2):
        opens, closes = _window_bounds(window, local_day + datetime.timedelta(days=offset))
        # Compared in UTC: two times of one zone compare by wall clock, which would take a
        # window inside a spring-forward gap for a non-empty one.
        if closes.astimezone(datetime.UTC) > max(earliest, opens.astimezone(datetime.UTC)):
            return Period(max(opens, earliest).astimezone(datetime.UTC),
                          closes.astimezone(datetime.UTC))
    raise AssertionError("a non-empty daily window always comes again")


def call_rate(terms: Mapping[str, Any], at_once: int) -> int | None:
    """Bytes a second for each host call of a job: the stricter of its per-host rate and
    its job rate shared by the ``at_once`` calls that can download together; ``None``:
    neither is set.

    NOTE: a fixed share keeps the job's sum under its rate without the conductor following
    each download; the price is a slower tail once fewer hosts than that remain
    (docs/fleet-operations.md)."""
    rates = []
    if terms.get("host_bytes_per_second"):
        rates.append(int(terms["host_bytes_per_second"]))
    if terms.get("job_bytes_per_second"):
        rates.append(max(1, int(terms["job_bytes_per_second"]) // max(1, at_once)))
    return min(rates) if rates else None


def is_open(terms: Mapping[str, Any], now: datetime.datetime) -> bool:
    """Whether a job with ``terms`` may start a download at ``now``."""
    period = next_period(terms, now)
    return period is not None and period.opens <= now.astimezone(datetime.UTC)


def past_deadline(terms: Mapping[str, Any], now: datetime.datetime) -> bool:
    """Whether the job's deadline has come (a job without one never ends this way)."""
    return bool(terms.get("deadline")) and parse_instant(terms["deadline"]) <= now
