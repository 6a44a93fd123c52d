"""The worker threads of a verified download, each fed by a queue bounded in bytes.

A :class:`~fleetcache.image.verify.VerifyingWriter` hands every chunk to two lanes, the hash
and the writer. Their queues are bounded in bytes, not in chunks: a source reads chunks of
64 KiB to 4 MiB (:mod:`~fleetcache.image.prompt_chunks`), and a bound of four chunks let a
download from a peer, which then read at most 1 MiB at a time, run only 4 MiB ahead of its
disk where one from Glance ran 16 MiB ahead. Each write of those 1 MiB chunks began only once
the previous one had returned and the writer thread had been woken on a CPU busy receiving,
so a momentary lag of the receive or the hash left the disk idle: 216-238 MB/s from a peer on
a disk whose ``dd oflag=direct`` wrote 1 MiB blocks at 300-350 MB/s, 252-291 MB/s with 16 MiB
queued in a scratch A/B of 4 alternated rounds; ``bench/download.py``'s two runs of this code
(204-270 MB/s) did not confirm the gain (docs/performance.md, "Download from Glance").
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from fleetcache.image.source import Buffer

LOG = logging.getLogger(__name__)

#: Bytes a lane of a download holds, queued or being worked on: four of Glance's 4 MiB
#: chunks (so a download's pool holds at most these and the chunk being received).
PIPELINE_BYTES = 16 * 1024 * 1024


def confine(cpus: frozenset[int] | set[int]) -> bool:
    """Keep the calling thread on ``cpus``; False (logged) when the kernel refuses."""
    try:
        os.sched_setaffinity(0, cpus)
    except OSError as exc:  # e.g. the cgroup's CPU set changed meanwhile
        LOG.debug("cannot set this thread's CPU affinity to %s: %s", sorted(cpus), exc)
        return False
    return True


class ByteQueue:
    """A FIFO of chunks ended by ``None``, holding at most ``limit`` bytes (one larger chunk
    when it holds nothing), those taken by :meth:`get` counted until :meth:`release`.

    :meth:`put` of a chunk blocks while it would not fit; ``None`` (the end) is always taken.
    """

    def __init__(self, limit: int = PIPELINE_BYTES) -> None:
        self.limit = limit
        self._items: collections.deque[Buffer | None] = collections.deque()
        self._bytes = 0
        self._changed = threading.Condition()

    def put(self, item: Buffer | None) -> None:
        size = 0 if item is None else len(item)
        with self._changed:
            while size and self._bytes and self._bytes + size > self.limit:
                self._changed.wait()
            self._items.append(item)
            self._bytes += size
            self._changed.notify_all()

    def get(self) -> Buffer | None:
        """The next item, waiting for it; a chunk still counts against the limit until it
        is released."""
        with self._changed:
            while not self._items:
                self._changed.wait()
            return self._items.popleft()

    def release(self, chunk: Buffer) -> None:
        """``chunk``, taken by :meth:`get`, is done with: its bytes no longer count."""
        with self._changed:
            self._bytes -= len(chunk)
            self._changed.notify_all()


class Lane(threading.Thread):
    """One worker of a verified download: applies its ``steps`` to every chunk, in order.

    After the first error (kept in ``error``) it drains its queue without working, so that
    the reader never blocks on a full queue. ``done`` is called with every chunk once this
    lane no longer needs it, worked on or not. ``cpus``: the CPUs it keeps to (None: those it
    inherits).
    """

    def __init__(self, name: str, steps: Sequence[Callable[[Buffer], Any]],
                 done: Callable[[Buffer], None], cpus: frozenset[int] | None = None,
                 limit: int = PIPELINE_BYTES) -> None:
        super().__init__(name=name, daemon=True)
        self.steps = tuple(steps)
        self.cpus = cpus
        self.done = done
        self.queue = ByteQueue(limit)
        self.error: BaseException | None = None
        #: Set when the download is aborted: the chunks still queued are dropped.
        self.cancelled = False

    def run(self) -> None:
        if self.cpus is not None:
            confine(self.cpus)
        while (chunk := self.queue.get()) is not None:
            try:
                if self.error is None and not self.cancelled:
                    for step in self.steps:
                        step(chunk)
            except BaseException as exc:  # handed to the reader thread
                self.error = exc
            finally:
                self.done(chunk)
                self.queue.release(chunk)
