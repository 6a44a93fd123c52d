"""Glance's access log on the local stack: one line per request, parsed (tests count image
downloads in it, and how many ran at once)."""

from __future__ import annotations

import dataclasses
import re

_ACCESS_LINE = re.compile(
    r'^(?P<client>\S+) \[(?P<time>[^]]+)\] "(?P<method>\S+) (?P<path>\S+) [^"]*" '
    r'(?P<status>\d+) (?P<size>\d+) (?P<seconds>[\d.]+) (?P<request_id>\S+) ')
#: The last field: when the request started (tools/glance/gunicorn_hooks.py).
_STARTED = re.compile(r' (?P<started>\d+\.\d+)$')
#: The chunk the stack's Glance reads its file store in, and counts a response's bytes by
#: (``filesystem_store_chunk_size``, tools/glance/glance-api.conf.in).
GLANCE_CHUNK = 4 * 1024 * 1024


def most_counted_for_cut(kept: int) -> int:
    """The most Glance's log counts for a GET its client cut after ``kept`` bytes arrived.

    Glance counts every chunk its store yielded: the one holding the kept offset, and the
    next one it was writing while the kernels held what the client had not read yet.
    """
    return -(-kept // GLANCE_CHUNK) * GLANCE_CHUNK + GLANCE_CHUNK


@dataclasses.dataclass(frozen=True)
class GlanceRequest:
    """One line of Glance's access log (format: ``GLANCE_ACCESS_FORMAT`` in tools/stack.sh)."""

    method: str
    path: str
    status: int
    size: int
    #: Seconds the request took (the line is written when the response ends).
    seconds: float
    #: The ``X-OpenStack-Request-ID`` the client sent (a compute sends its job's global
    #: request id), None when it sent none.
    request_id: str | None
    #: When Glance started the request (epoch seconds); None in a line of a Glance
    #: started without tools/glance/gunicorn_hooks.py.
    started: float | None = None

    @property
    def ended(self) -> float | None:
        """When the response ended (epoch seconds), from the start and the duration."""
        return None if self.started is None else self.started + self.seconds

    @classmethod
    def parse(cls, line: str) -> GlanceRequest:
        match = _ACCESS_LINE.match(line)
        if match is None:
            raise AssertionError(f"not a Glance access log line: {line!r}")
        request_id = match["request_id"]
        started = _STARTED.search(line.rstrip())
        return cls(method=match["method"], path=match["path"], status=int(match["status"]),
                   size=int(match["size"]), seconds=float(match["seconds"]),
                   request_id=None if request_id == "-" else request_id,
                   started=float(started["started"]) if started else None)
