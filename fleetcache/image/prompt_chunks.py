"""Reads of a streamed body sized so that each chunk arrives within about 1/32 s.

:func:`prompt_chunks` reads a body that hands over ``bytes``, :func:`prompt_reads` one that
fills the caller's buffers.

A download hands on whole chunks: to the hash, to its file, and through the file to the
receivers a cut-through download serves (``[image_cache] peer_cut_through``). A chunk of a
fixed ``[glance] download_chunk_size`` (4 MiB) takes a second to arrive over a 4 MiB/s edge
link, so each byte sat up to a second in the reader before any receiver could have it, and a
host that died took up to a chunk with it that its receivers never had: in
``bench/p2p.py``'s kill fault the head of a chain died with 5 MiB from the image service
unwritten and 4 MiB written but not yet served, 1.28 copies of a 32 MiB image for its group
(docs/performance.md, "Peer distribution").

:class:`ChunkSizer` sizes each read by the rate the previous one arrived at: about
:data:`CHUNK_TIME` of it, a power of two between :data:`SMALLEST` and the caller's largest.
It starts at the smallest and at most doubles per chunk (a fast link reaches 4 MiB in
seven reads, so nothing changes for a download from a nearby image service), and shrinks at
once when bytes slow down. Only the wait inside the read counts: a reader held back by its
own consumers finds its bytes buffered and keeps large chunks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Protocol

#: The time a chunk should take to arrive (seconds).
CHUNK_TIME = 1 / 32
#: The smallest read: below it the per-chunk work would cost more than the wait it saves.
SMALLEST = 64 * 1024


class RawBody(Protocol):
    """A response body read in pieces of a given size (urllib3's ``HTTPResponse``)."""

    def read(self, amt: int | None = None, decode_content: bool | None = None) -> bytes: ...


class ChunkSizer:
    """The size of the next read of one stream, from how fast the previous ones arrived."""

    def __init__(self, largest: int) -> None:
        self.largest = max(largest, 1)
        self.size = min(SMALLEST, self.largest)

    def took(self, nbytes: int, seconds: float) -> None:
        """A read of ``nbytes`` waited ``seconds``: size the next one."""
        wanted = int(nbytes / max(seconds, 1e-6) * CHUNK_TIME)
        ceiling = min(self.largest, 2 * self.size)
        if wanted >= ceiling:
            self.size = ceiling
        else:
            self.size = min(max(_power_of_two_below(wanted), SMALLEST), ceiling)


def prompt_chunks(body: RawBody, largest: int,
                  clock: Callable[[], float] = time.monotonic) -> Iterator[bytes]:
    """The chunks of ``body`` (decoded as it is sent), each at most ``largest`` bytes, sized
    by :class:`ChunkSizer`. Errors of the transport propagate as ``body`` raises them."""
    sizer = ChunkSizer(largest)
    while True:
        start = clock()
        chunk = body.read(sizer.size, decode_content=True)
        if not chunk:
            return
        sizer.took(len(chunk), clock() - start)
        yield chunk


def prompt_reads(readinto: Callable[[memoryview], int],
                 buffer_for: Callable[[int], memoryview], largest: int,
                 clock: Callable[[], float] = time.monotonic) -> Iterator[memoryview]:
    """The same chunks read into buffers: each of :class:`ChunkSizer`'s size from
    ``buffer_for(size)``, filled by ``readinto`` (a body that fills a buffer unless it ends),
    yielded as the view of what it holds. Errors of the transport propagate."""
    sizer = ChunkSizer(largest)
    while True:
        view = buffer_for(sizer.size)
        start = clock()
        n = readinto(view)
        if not n:
            return
        sizer.took(n, clock() - start)
        yield view[:n]


def _power_of_two_below(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)
