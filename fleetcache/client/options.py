"""The command-line options both clients share (``fleetcache`` and the ``openstack`` plugin):
the pin and the terms of a pre-cache request, and ``fleetcache``'s machine-readable output.

The pin and the terms are checked for their form only (a whole number of seconds, a time with
its offset, ``HH:MM-HH:MM``, a rate such as ``8M``), so a typo fails before any request with a
message naming the option; their limits are the API's to judge
(``fleetcache/api/schemas/aggregate_images.py``, the operator's ``[image_cache]`` caps), and
the API's 400 names them.

Use::

    options.add_pin_option(parser)                  # --pin-seconds SECONDS
    options.add_terms_options(parser)               # --not-before, --window, ... --priority
    terms = options.terms_from_args(parsed_args)    # {} when no terms option was given
    options.add_format_option(show_parser)          # -f/--format table|json|yaml
"""

from __future__ import annotations

import argparse
import datetime
import re
from typing import Any

#: Output formats of ``fleetcache``'s commands: ``table`` for people, the others print the
#: API's own objects (the keys of docs/api.md), as ``openstack ... -f json|yaml`` does.
FORMATS = ("table", "json", "yaml")
#: The time zone of ``--window`` without ``--timezone``.
DEFAULT_TIMEZONE = "UTC"
#: The rate suffixes: binary multiples, as ``8M`` for 8 MiB/s.
RATE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
#: Bytes only: a lower-case ``b`` (``8Mb``) reads as bits to most people and is refused.
_RATE_RE = re.compile(r"^\s*(\d{1,16})\s*([kmgtKMGT]?)(?:[iI]?B)?(?:/s)?\s*$")
_CLOCK = r"(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d)?"
_WINDOW_RE = re.compile(rf"^\s*({_CLOCK})\s*-\s*({_CLOCK})\s*$")


class TermsUsageError(ValueError):
    """Terms options that do not go together (``--timezone`` without ``--window``)."""


def pin_seconds(value: str) -> int:
    """``--pin-seconds``'s type: a whole number of seconds, 1 or more.

    :raises argparse.ArgumentTypeError: naming what was given and what is expected.
    """
    try:
        seconds = int(value, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a whole number of seconds (a day is 86400)") from None
    if seconds < 1:
        raise argparse.ArgumentTypeError(f"{seconds} is not a positive number of seconds")
    return seconds


def add_pin_option(parser: argparse.ArgumentParser, metavar: str = "SECONDS") -> None:
    """``--pin-seconds SECONDS`` on a pre-cache command (``<seconds>`` in ``openstack``'s
    style)."""
    parser.add_argument(
        "--pin-seconds", metavar=metavar, type=pin_seconds, default=None,
        help="pin the images on the aggregate's hosts for this many seconds from the job's "
        "creation: the hosts' image cache ageing keeps them until then (the request's "
        "fleetcache:pin_seconds; the API refuses more than its limit, naming it)")


def add_format_option(parser: argparse.ArgumentParser) -> None:
    """``-f/--format table|json|yaml`` on a command that prints an API object."""
    parser.add_argument(
        "-f", "--format", choices=FORMATS, default="table",
        help="output format (default: table); json and yaml print the API's object with "
        "its documented keys")


def instant(value: str) -> str:
    """``--not-before``/``--deadline``'s type: an ISO 8601 time with its offset, as given.

    :raises argparse.ArgumentTypeError: for anything else, or a time without an offset.
    """
    try:
        parsed = datetime.datetime.fromisoformat(value.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an ISO 8601 time such as 2026-11-29T01:00:00Z") from None
    if parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} has no time zone offset (add Z for UTC, or +01:00...)")
    return value.strip()


def window(value: str) -> tuple[str, str]:
    """``--window``'s type: ``HH:MM-HH:MM`` (or with seconds), 24 h; end before start spans
    midnight. :raises argparse.ArgumentTypeError: for anything else."""
    match = _WINDOW_RE.match(value)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a daily window HH:MM-HH:MM such as 22:00-05:00")
    return match[1], match[2]


def rate(value: str) -> int:
    """``--host-rate``/``--job-rate``'s type: bytes per second, with an optional binary
    suffix (``512K``, ``8M``, ``1G``, also ``8MiB`` or ``8M/s``).

    :raises argparse.ArgumentTypeError: for anything else, or 0.
    """
    match = _RATE_RE.match(value)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a rate in bytes per second such as 8M (MiB/s) or 512K")
    number = int(match[1]) * RATE_UNITS[match[2].lower()]
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive rate")
    return number


def count(value: str) -> int:
    """``--parallelism``/``--origin-downloads``'s type: a whole number, 1 or more."""
    return _whole(value, 1, None, "is not 1 or more")


def priority(value: str) -> int:
    """``--priority``'s type: a whole number from 0 to 100."""
    return _whole(value, 0, 100, "is not from 0 to 100")


def _whole(value: str, least: int, most: int | None, out_of_range: str) -> int:
    """``value`` as a whole number within ``least``..``most`` (``None``: no top).

    :raises argparse.ArgumentTypeError: naming what was given and what is expected.
    """
    try:
        number = int(value, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < least or (most is not None and number > most):
        raise argparse.ArgumentTypeError(f"{number} {out_of_range}")
    return number


def add_terms_options(parser: argparse.ArgumentParser, openstack_style: bool = False) -> None:
    """The terms of a pre-cache request (the body's ``fleetcache:*`` keys, sent at
    ``fleetcache 1.1`` only when one is given); ``openstack_style`` writes the metavars as
    ``<time>``."""

    def meta(name: str) -> str:
        return f"<{name.lower().replace(' ', '-')}>" if openstack_style else name

    group = parser.add_argument_group(
        "job terms", "when the job may download and how hard it may pull; the API refuses "
        "(naming the option's key) a limit above the operator's")
    group.add_argument("--not-before", metavar=meta("TIME"), type=instant,
                       help="start no download before this ISO 8601 time with its offset "
                       "(2026-11-29T01:00:00Z)")
    group.add_argument("--window", metavar=meta("HH:MM-HH:MM"), type=window,
                       help="download only in this daily window (end before start spans "
                       "midnight), in --timezone")
    group.add_argument("--timezone", metavar=meta("NAME"),
                       help=f"the IANA time zone of --window (default {DEFAULT_TIMEZONE})")
    group.add_argument("--deadline", metavar=meta("TIME"), type=instant,
                       help="stop the job at this ISO 8601 time; what is not cached by then "
                       "is not")
    group.add_argument("--parallelism", metavar=meta("N"), type=count,
                       help="hosts called at once (at most [image_cache] precache_concurrency)")
    group.add_argument("--origin-downloads", metavar=meta("N"), type=count,
                       help="downloads from the image service at once for this job (at most "
                       "[image_cache] max_concurrent_downloads)")
    group.add_argument("--host-rate", metavar=meta("BYTES/s"), type=rate,
                       help="each host's download rate: 8M is 8 MiB/s, 512K 512 KiB/s (at "
                       "most [image_cache] max_download_bytes_per_second)")
    group.add_argument("--job-rate", metavar=meta("BYTES/s"), type=rate,
                       help="the job's download rate over all its hosts (8M, 512K...)")
    group.add_argument("--priority", metavar=meta("N"), type=priority,
                       help="0 to 100, default 50: higher goes first among jobs waiting for "
                       "the same slots")


#: Each terms option's destination and the key of the request's terms it sets.
_TERMS_OPTIONS = (("not_before", "not_before"), ("deadline", "deadline"),
                  ("parallelism", "parallelism"), ("origin_downloads", "origin_downloads"),
                  ("host_rate", "host_bytes_per_second"), ("job_rate", "job_bytes_per_second"),
                  ("priority", "priority"))


def terms_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The request's terms (keys of ``JobTerms``, without the ``fleetcache:`` prefix) the
    terms options give, in the API's order; ``{}`` when none is given.

    :raises TermsUsageError: for ``--timezone`` without ``--window``.
    """
    terms: dict[str, Any] = {}
    if getattr(args, "window", None) is not None:
        start, end = args.window
        terms["window"] = {"start": start, "end": end,
                           "timezone": args.timezone or DEFAULT_TIMEZONE}
    elif getattr(args, "timezone", None):
        raise TermsUsageError("--timezone is the time zone of --window: give --window too")
    for dest, key in _TERMS_OPTIONS:
        value = getattr(args, dest, None)
        if value is not None:
            terms[key] = value
    # The API's order (fleetcache.common.job_terms.KEYS: the client imports nothing of the
    # services).
    order = ("not_before", "window", "deadline", "parallelism", "origin_downloads",
             "host_bytes_per_second", "job_bytes_per_second", "priority")
    return {key: terms[key] for key in order if key in terms}
