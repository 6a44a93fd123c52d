"""Writing a download to its file with ``O_DIRECT``: no copy into the page cache, no write-back.

A buffered write copies each chunk into the page cache, and the kernel then writes those
pages back (``EarlyWriteback`` starts that every 32 MiB, in the writer thread); the cached
base is not read again soon, so none of that work is of use. :class:`ODirectWriter` hands
the disk the chunk's own memory instead: on this project's machines ``dd oflag=direct``
took a fraction of ``dd conv=fsync``'s wall and CPU (docs/performance.md, "Durable writes and
O_DIRECT").

``O_DIRECT`` wants the buffer's address, the length and the file offset aligned to the
device's logical block (512 or 4096 bytes): a page-aligned chunk of whole pages
(:mod:`fleetcache.image.chunks`) is written as it is; anything else (``bytes`` from HTTP, a
short last chunk) is copied into an aligned staging buffer and written from there when it
is full. The unaligned tail of the file is written without ``O_DIRECT`` by :meth:`finish`.
Durability is unchanged: ``O_DIRECT`` does not flush the disk's cache or the file's
metadata, so the caller still ``fsync`` s before the rename.

:func:`file_sink` falls back to buffered writes with :class:`EarlyWriteback` where the file
system refuses ``O_DIRECT`` (``fcntl`` says ``EINVAL``), and a writer turns ``O_DIRECT`` off
for the rest of the file if a direct write is refused all the same.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import logging
import mmap
import os
from typing import BinaryIO, Protocol

from fleetcache.compute.imagecache.files import EarlyWriteback
from fleetcache.image.chunks import map_buffer
from fleetcache.image.source import Buffer

LOG = logging.getLogger(__name__)

#: Alignment of direct writes: a page, a multiple of either logical block size.
ALIGN = mmap.PAGESIZE
#: Staging buffer for chunks that cannot be written as they are (the download chunk size).
STAGE = 4 * 1024 * 1024


class FileSink(Protocol):
    """Where a download's verified bytes go: ``write`` each chunk, ``finish`` at the end."""

    #: Whether a page-aligned chunk of whole pages is written as it is, and anything else
    #: copied into an aligned buffer first (``O_DIRECT``).
    direct: bool

    def write(self, data: Buffer, /) -> int: ...

    def finish(self) -> None:
        """Everything written is in the file (not yet durable: the caller fsyncs)."""


def file_sink(f: BinaryIO) -> FileSink:
    """An :class:`ODirectWriter` on ``f`` when its file system takes ``O_DIRECT``, else
    buffered writes with :class:`EarlyWriteback`. ``f`` must be empty and at offset 0."""
    fd = f.fileno()
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_DIRECT)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        LOG.debug("%s: no O_DIRECT on this file system, buffered writes", f.name)
        return _Buffered(f)
    return ODirectWriter(fd)


class _Buffered(EarlyWriteback):
    direct = False

    def finish(self) -> None:
        self.f.flush()


class ODirectWriter:
    """Writes to ``fd``, opened or switched to ``O_DIRECT``, from offset 0 on.

    The staging buffer is mapped when a chunk first needs it (a download made only of whole
    pages in pool buffers never does), through :func:`~fleetcache.image.chunks.map_buffer`:
    a host out of memory then raises ``MemoryError``, which the image cache reports as
    such, not as a file it "cannot write".
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.direct = True
        self.written = 0
        self._stage: mmap.mmap | None = None
        self._staged = 0

    def write(self, data: Buffer, /) -> int:
        n = len(data)
        view = memoryview(data).cast("B")
        if not self._staged and (not self.direct or _aligned(view)):
            self._write_all(view)
        else:
            self._stage_copy(view)
        return n

    def finish(self) -> None:
        """Write what is staged: its whole blocks directly, the rest without ``O_DIRECT``
        (the file's end, which is where an unaligned tail can only be)."""
        if self._stage is None:
            return
        stage = memoryview(self._stage)
        head = self._staged - self._staged % ALIGN
        self._write_all(stage[:head])
        if head < self._staged:
            self._buffered()
            self._write_all(stage[head:self._staged])
        self._staged = 0

    def _stage_copy(self, view: memoryview) -> None:
        if self._stage is None:
            self._stage = map_buffer(STAGE)
        stage = memoryview(self._stage)
        while view:
            take = min(len(view), STAGE - self._staged)
            stage[self._staged:self._staged + take] = view[:take]
            self._staged += take
            view = view[take:]
            if self._staged == STAGE:
                self._write_all(stage)
                self._staged = 0

    def _write_all(self, view: memoryview) -> None:
        while view:
            try:
                n = os.write(self.fd, view)
            except OSError as exc:
                if exc.errno != errno.EINVAL or not self.direct:
                    raise
                LOG.warning("O_DIRECT write refused at offset %d (%s): buffered writes for "
                            "the rest of the file", self.written, exc)
                self._buffered()
                continue
            self.written += n
            view = view[n:]

    def _buffered(self) -> None:
        if self.direct:
            flags = fcntl.fcntl(self.fd, fcntl.F_GETFL)
            fcntl.fcntl(self.fd, fcntl.F_SETFL, flags & ~os.O_DIRECT)
            self.direct = False


def _aligned(data: Buffer) -> bool:
    """Whether ``data`` can be written with ``O_DIRECT`` as it is: whole blocks, starting on a
    block boundary (only writable buffers show their address here; ``bytes`` count as not)."""
    if len(data) % ALIGN:
        return False
    try:
        address = ctypes.addressof(ctypes.c_char.from_buffer(data))
    except (TypeError, ValueError):
        return False
    return address % ALIGN == 0
