"""HTTP/1.1 as the peer image server speaks it: the request head in, one byte range, the
response head out.

The server answers one route for other computes' :class:`~.source.PeerSource` only, so it
speaks the least HTTP that route needs rather than carry a general server: one request per
connection (``Connection: close``), no body, no chunking, no keep-alive, one range. What is
left is small enough to read whole, and every limit is explicit: a head larger than
:data:`MAX_HEAD` is refused, and the head must arrive before a deadline (the listener's door,
:mod:`~.listener`, reads it without holding a worker).

Refusals are :class:`Refused` (a status, a reason for the counters, extra headers), raised
here and by :class:`~.server.PeerServer`, which answers and counts them in one place.
"""

from __future__ import annotations

import re
import socket

#: Largest request head read (a token is a few hundred bytes).
MAX_HEAD = 8192
#: ASCII digits only (``\d`` takes any script's, and ``int`` reads them), and at most 19: a
#: byte offset of a file fits in 63 bits; more digits would make ``int`` refuse the number
#: (Python's 4,300-digit limit) with a ``ValueError`` instead of a 416.
_RANGE = re.compile(r"bytes=([0-9]{1,19})-([0-9]{0,19})")
_REASONS = {200: "OK", 206: "Partial Content", 400: "Bad Request", 401: "Unauthorized",
            403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            416: "Range Not Satisfiable", 431: "Request Header Fields Too Large",
            503: "Service Unavailable"}
#: The header of a 404 that says the server does not hold the image asked for (its value is
#: the image's id): any other 404 (a wrong route, another HTTP service at the peer's URL)
#: does not carry it, so a receiver sets such a peer aside for that image only when this
#: server said so (:mod:`~.source`).
NOT_CACHED_HEADER = "Fleetcache-Not-Cached"


class Refused(Exception):
    """A request answered with ``status`` and no body (status 0: not answered at all).

    :ivar reason: why, as the server counts and logs it.
    :ivar headers: extra response headers (``Retry-After``, ``WWW-Authenticate``...).
    """

    def __init__(self, status: int, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = headers or {}


class RangeNotSatisfiable(Exception):
    """A ``Range`` header this server does not serve (416)."""


def parse_range(value: str | None, size: int) -> tuple[int, int] | None:
    """``(first, last)`` (inclusive) of the one range ``value`` asks of a file of ``size``
    bytes; None: no ``Range``, the whole file. A ``last`` past the end is cut to the end.

    :raises RangeNotSatisfiable: several ranges, a suffix range, another unit, a first byte
        at or past the end, or a last byte before the first.
    """
    if value is None:
        return None
    match = _RANGE.fullmatch(value.strip())
    if match is None:
        raise RangeNotSatisfiable(f"only one range bytes=<first>-[<last>]: {value!r}")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else size - 1
    if first >= size or last < first:
        raise RangeNotSatisfiable(f"{value!r} of {size} bytes")
    return first, min(last, size - 1)


def head_ended(data: bytes | bytearray) -> bool:
    """Whether ``data``, the first bytes of a request, hold its whole head."""
    return b"\r\n\r\n" in data


def parse_head(data: bytes) -> tuple[str, str, dict[str, str]]:
    """``(method, target, headers)`` of the request whose first bytes are ``data`` (header
    names lower-case).

    :raises Refused: 431 when ``data`` is larger than :data:`MAX_HEAD` without a whole head,
        400 when the head is no HTTP/1.x request head.
    """
    if not head_ended(data):
        raise Refused(431 if len(data) > MAX_HEAD else 400, "head too large or cut")
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    request_line, *lines = head.split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Refused(400, "request line")
    headers: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(":")
        name = name.strip().lower()
        if not colon or not name or name in headers:
            raise Refused(400, f"header {name!r}")
        headers[name] = value.strip()
    return parts[0], parts[1], headers


def send_head(sock: socket.socket, status: int, headers: dict[str, str]) -> None:
    """Send the response head: ``status``, ``headers``, and ``Content-Length: 0`` unless
    ``headers`` give one (a refusal has no body).

    :raises OSError: the client left or the send timed out.
    """
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, '')}",
             "Content-Type: application/octet-stream", "Connection: close",
             *(f"{k}: {v}" for k, v in headers.items())]
    if "Content-Length" not in headers:
        lines.append("Content-Length: 0")
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
