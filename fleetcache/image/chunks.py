"""Page-aligned receive buffers for a download's chunks, reused once every worker is done.

A source that receives into a buffer it provides (the rbd path's FIFO ``readv``) asks its
writer for one (:func:`receive_buffer`) instead of allocating a fresh ``bytearray`` per chunk;
a chunk that arrives as ``bytes`` (HTTP) can be copied into one (:meth:`ChunkPool.copy_in`).
The buffers of a :class:`ChunkPool` are anonymous ``mmap`` s, so:

* each starts on a page boundary: the image cache's file sink writes a full chunk of one with
  ``O_DIRECT`` as it is, without copying it into an aligned buffer first;
* each is reused once the :class:`~fleetcache.image.verify.VerifyingWriter`'s workers are done
  with it, instead of a new 4 MiB allocation per chunk that the kernel zero-fills page by page
  (1,024 page faults per chunk) and the allocator hands back after it.
"""

from __future__ import annotations

import errno
import mmap
import threading

from fleetcache.image.source import Buffer, Writer


def map_buffer(size: int) -> mmap.mmap:
    """An anonymous, page-aligned mapping of ``size`` bytes for a download's bytes.

    :raises MemoryError: the host has no memory for it (``ENOMEM``). Not an ``OSError``: the
        sources map the ``OSError`` s of their reads to a transient transfer failure (a
        retry, or the next peer), and the image cache those of its writes to "cannot write",
        neither of which a host out of memory is. Any other ``mmap`` error stays an
        ``OSError``.
    """
    try:
        return mmap.mmap(-1, size)
    except OSError as exc:
        if exc.errno != errno.ENOMEM:
            raise
        raise MemoryError(f"cannot map a {size}-byte download buffer: {exc}") from exc


class ChunkPool:
    """Buffers handed out by :meth:`acquire`, free again once every reader of the chunk made
    of one is done with it (:meth:`handed`, then :meth:`seen` by each reader).

    There is no upper bound here: the writer's bounded queues already bound how many chunks
    are in flight, and a pool that never blocks cannot deadlock a source that keeps a buffer
    it did not fill (the last read of a stream). A source holds one buffer at a time: one
    acquired and not handed on by the next :meth:`acquire` (a read that failed or found the
    end, a chunk a server that ignored ``Range`` sent again and the source dropped) is lent
    again, so that a dropped read costs no new buffer. The pool refers to no one who uses
    it (its readers hold it), so it and its buffers go as soon as the download's writer goes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: dict[int, list[mmap.mmap]] = {}
        #: Every buffer made here, by ``id``: how a chunk of one is recognised.
        self._made: dict[int, mmap.mmap] = {}
        #: Buffers handed on -> readers still to see them (by ``id``).
        self._visits: dict[int, int] = {}
        #: The buffer last acquired, until it is handed on.
        self._lent: mmap.mmap | None = None

    def acquire(self, size: int) -> memoryview:
        """A writable, page-aligned buffer of ``size`` bytes (reused, or made now).

        :raises MemoryError: the host has no memory for the buffer (:func:`map_buffer`)."""
        with self._lock:
            lent, self._lent = self._lent, None
            if lent is not None:  # acquired, never handed on: the source dropped it
                self._free.setdefault(len(lent), []).append(lent)
            free = self._free.get(size)
            if free:
                self._lent = free.pop()
                return memoryview(self._lent)
        buf = map_buffer(size)
        with self._lock:
            self._made[id(buf)] = buf
            self._lent = buf
        return memoryview(buf)

    def copy_in(self, chunk: Buffer) -> Buffer:
        """``chunk`` itself if it is one of this pool's buffers, else a copy of it in one."""
        if self._owner(chunk) is not None:
            return chunk
        view = self.acquire(len(chunk))
        view[:] = memoryview(chunk).cast("B")
        return view

    def handed(self, chunk: Buffer, readers: int) -> None:
        """``chunk`` goes to ``readers`` readers; nothing to do unless it is one of ours."""
        buf = self._owner(chunk)
        if buf is not None:
            with self._lock:
                if buf is self._lent:
                    self._lent = None
                self._visits[id(buf)] = self._visits.get(id(buf), 0) + readers

    def seen(self, chunk: Buffer) -> None:
        """One reader is done with ``chunk``; after the last, its buffer is free again."""
        buf = self._owner(chunk)
        if buf is None:
            return
        with self._lock:
            left = self._visits.pop(id(buf)) - 1
            if left:
                self._visits[id(buf)] = left
            else:
                self._free.setdefault(len(buf), []).append(buf)

    def _owner(self, chunk: Buffer) -> mmap.mmap | None:
        if isinstance(chunk, memoryview):
            with self._lock:
                buf = self._made.get(id(chunk.obj))
            if buf is not None and buf is chunk.obj:
                return buf
        return None


def receive_buffer(writer: Writer, size: int) -> memoryview:
    """A buffer of ``size`` bytes to receive the next chunk into, then hand to ``writer``.

    The writer's own when it has a pool (``receive_buffer`` method: aligned and reused),
    else a fresh ``bytearray`` (the writer may keep it: nobody touches it again).
    """
    get = getattr(writer, "receive_buffer", None)
    if callable(get):
        view = get(size)
        if isinstance(view, memoryview):
            return view
    return memoryview(bytearray(size))
