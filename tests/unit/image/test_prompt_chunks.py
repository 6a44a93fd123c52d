"""Unit tests of the read sizes of :mod:`fleetcache.image.prompt_chunks`."""

from __future__ import annotations

import io

from fleetcache.image.prompt_chunks import SMALLEST, ChunkSizer, prompt_chunks, prompt_reads
from tests.unit.common.clock import Clock

MIB = 1024 * 1024


def _sizes(sizer: ChunkSizer, rate: float, reads: int) -> list[int]:
    """The read sizes of ``reads`` reads whose bytes arrive at ``rate`` bytes a second."""
    sizes = []
    for _ in range(reads):
        sizes.append(sizer.size)
        sizer.took(sizer.size, sizer.size / rate)
    return sizes


def test_a_fast_link_doubles_from_the_smallest_read_to_the_largest() -> None:
    sizes = _sizes(ChunkSizer(4 * MIB), rate=1e9, reads=9)
    assert sizes == [SMALLEST << i for i in range(7)] + [4 * MIB] * 2


def test_a_slow_link_reads_about_a_thirty_second_of_a_second() -> None:
    # 4 MiB/s, bench/p2p.py's edge link: 128 KiB reads (31 ms each), not 4 MiB (a second).
    sizes = _sizes(ChunkSizer(4 * MIB), rate=4 * MIB, reads=6)
    assert sizes == [64 * 1024] + [128 * 1024] * 5


def test_reads_shrink_at_once_when_bytes_slow_down() -> None:
    sizer = ChunkSizer(4 * MIB)
    _sizes(sizer, rate=1e9, reads=8)
    assert sizer.size == 4 * MIB
    sizer.took(4 * MIB, 1.0)  # a second for 4 MiB: the next read 128 KiB
    assert sizer.size == 128 * 1024


def test_reads_stay_between_the_smallest_and_the_largest() -> None:
    sizer = ChunkSizer(4 * MIB)
    sizer.took(SMALLEST, 60.0)  # a stall
    assert sizer.size == SMALLEST
    small = ChunkSizer(1000)  # a largest below the smallest read wins
    assert _sizes(small, rate=1e9, reads=3) == [1000] * 3
    assert _sizes(ChunkSizer(3 * MIB), rate=1e9, reads=9)[-1] == 3 * MIB


def test_prompt_chunks_yields_the_body_in_order_in_the_sizers_reads() -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    clock = Clock()

    class SlowBody:
        """A body whose bytes arrive at 4 MiB/s on ``clock``."""

        def __init__(self) -> None:
            self.data = io.BytesIO(data)
            self.asked: list[int] = []

        def read(self, amt: int | None = None, decode_content: bool | None = None) -> bytes:
            assert decode_content is True
            self.asked.append(amt or 0)
            chunk = self.data.read(amt)
            clock.now += len(chunk) / (4 * MIB)
            return chunk

    body = SlowBody()
    chunks = list(prompt_chunks(body, 4 * MIB, clock))
    assert b"".join(chunks) == data
    assert body.asked[:3] == [64 * 1024, 128 * 1024, 128 * 1024]
    assert max(len(c) for c in chunks) == 128 * 1024
    assert body.asked[-1] == 128 * 1024  # the read that found the end


def test_prompt_reads_fills_the_buffers_it_is_given_in_the_sizers_reads() -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    clock = Clock()
    body = io.BytesIO(data)
    given: list[memoryview] = []

    def buffer_for(size: int) -> memoryview:
        given.append(memoryview(bytearray(size)))
        return given[-1]

    def readinto(view: memoryview) -> int:  # bytes arriving at 4 MiB/s on ``clock``
        n = body.readinto(view)
        clock.now += n / (4 * MIB)
        return n

    chunks = list(prompt_reads(readinto, buffer_for, 4 * MIB, clock))
    assert b"".join(chunks) == data
    assert [len(b) for b in given[:3]] == [64 * 1024, 128 * 1024, 128 * 1024]
    assert all(c.obj is b.obj for c, b in zip(chunks, given, strict=False))  # no copy
    assert len(given) == len(chunks) + 1  # the read that found the end
