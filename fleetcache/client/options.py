"""The command-line options both clients share (``fleetcache`` and the ``openstack`` plugin):
the pin of a pre-cache request, and ``fleetcache``'s machine-readable output.

The pin is checked for its form only (a whole number of seconds, at least 1), so a typo fails
before any request with a message naming the option; its upper limit is the API's to judge
(``fleetcache/api/schemas/aggregate_images.py``), and the API's 400 names it.

Use::

    parser.add_argument("--pin-seconds", type=options.pin_seconds, ...)
    options.add_format_option(show_parser)          # -f/--format table|json|yaml
"""

from __future__ import annotations

import argparse

#: Output formats of ``fleetcache``'s commands: ``table`` for people, the others print the
#: API's own objects (the keys of docs/api.md), as ``openstack ... -f json|yaml`` does.
FORMATS = ("table", "json", "yaml")


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
