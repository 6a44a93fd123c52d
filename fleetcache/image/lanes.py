"""The worker threads of a verified download, each fed by a queue bounded in bytes.

A :class:`~fleetcache.image.verify.VerifyingWriter` hands every chunk to two lanes, the hash
and the writer. Their queues are bounded in bytes, not in chunks: a source reads chunks of
64 KiB to 4 MiB (:mod:`~fleetcache.image.prompt_chunks`; at most 1 MiB from a peer), and a
bound of four chunks let a download from a peer run only 4 MiB ahead of its disk where one
from Glance ran 16 MiB ahead.

A lane given a ``batch`` step (the writer's) takes the chunks already queued, up to
:data:`BATCH_BYTES`, and hands them on in one call: a file sink writes them with one
``writev``. A download from a peer wrote 1,028 chunks of 1 MiB per GiB one at a time, each
only once the previous write had returned and the writer thread had been woken on a CPU busy
receiving: 4.3-4.8 s of writes per GiB, 216-238 MB/s, on a disk whose own ``dd
oflag=direct`` wrote 1 MiB blocks at 300-350 MB/s; with 16 MiB queued and the queued chunks
written together, 269-326 MB/s (docs/performance.md, "Download from Glance"). When the disk
keeps up nothing waits in the queue and each chunk is written as it comes; when it does not,
a cut-through receiver of this host sees the file grow a batch at a time.
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
#: Most bytes a batch step is handed at once: half the lane's, so that the reader fills the
#: other half meanwhile.
BATCH_BYTES = PIPELINE_BYTES // 2


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

    def get(self, most: int = 0) -> list[Buffer | None]:
        """The next item, waiting for it, and after it those already queued while the items
        taken stay within ``most`` bytes. ``None`` is only ever the last item taken. The
        chunks taken still count against the limit until they are released."""
        with self._changed:
            while not self._items:
                self._changed.wait()
            taken = [self._items.popleft()]
            total = 0 if taken[0] is None else len(taken[0])
            while taken[-1] is not None and self._items:
                following = self._items[0]
                if following is not None and total + len(following) > most:
                    break
                taken.append(self._items.popleft())
                total += 0 if following is None else len(following)
            return taken

    def release(self, chunks: Sequence[Buffer]) -> None:
        """``chunks``, taken by :meth:`get`, are done with: their bytes no longer count."""
        with self._changed:
            self._bytes -= sum(len(chunk) for chunk in chunks)
            self._changed.notify_all()


class Lane(threading.Thread):
    """One worker of a verified download: applies its ``steps`` to every chunk, in order, then
    (if given) its ``batch`` step to the chunks taken together.

    After the first error (kept in ``error``) it drains its queue without working, so that
    the reader never blocks on a full queue. ``done`` is called with every chunk once this
    lane no longer needs it, worked on or not. ``cpus``: the CPUs it keeps to (None: those it
    inherits).
    """

    def __init__(self, name: str, steps: Sequence[Callable[[Buffer], Any]],
                 done: Callable[[Buffer], None],
                 batch: Callable[[Sequence[Buffer]], Any] | None = None,
                 cpus: frozenset[int] | None = None,
                 limit: int = PIPELINE_BYTES) -> None:
        super().__init__(name=name, daemon=True)
        self.steps = tuple(steps)
        self.batch = batch
        self.cpus = cpus
        self.done = done
        self.queue = ByteQueue(limit)
        self.error: BaseException | None = None
        #: Set when the download is aborted: the chunks still queued are dropped.
        self.cancelled = False

    def run(self) -> None:
        if self.cpus is not None:
            confine(self.cpus)
        most = min(BATCH_BYTES, self.queue.limit) if self.batch is not None else 0
        while True:
            items = self.queue.get(most)
            chunks = [c for c in items if c is not None]
            self._work(chunks)
            if items[-1] is None:
                return

    def _work(self, chunks: list[Buffer]) -> None:
        try:
            if self.error is None and not self.cancelled:
                for chunk in chunks:
                    for step in self.steps:
                        step(chunk)
                if self.batch is not None and chunks:
                    self.batch(chunks)
        except BaseException as exc:  # handed to the reader thread
            self.error = exc
        finally:
            for chunk in chunks:
                self.done(chunk)
            self.queue.release(chunks)
