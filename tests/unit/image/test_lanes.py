"""Unit tests of a verified download's worker lanes (fleetcache.image.lanes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from fleetcache.image import lanes, verify
from fleetcache.image.source import Buffer, ImageMeta

WAIT = 5.0


def _put_in_thread(queue: lanes.ByteQueue, item: Buffer | None) -> threading.Event:
    put = threading.Event()

    def run() -> None:
        queue.put(item)
        put.set()

    threading.Thread(target=run, daemon=True).start()
    return put


def _settled(count: Callable[[], int], expected: int) -> int:
    """``count()`` once it reached ``expected`` (or after WAIT) and stayed a moment."""
    deadline = time.monotonic() + WAIT
    while count() < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # anything beyond ``expected`` would have come by now
    return count()


def test_a_queue_holds_at_most_its_bytes_counting_those_taken_until_released() -> None:
    queue = lanes.ByteQueue(limit=10)
    queue.put(b"a" * 4)
    queue.put(b"b" * 6)
    third = _put_in_thread(queue, b"c" * 3)
    assert not third.wait(0.2)  # 13 bytes would not fit
    assert queue.get() == b"a" * 4
    assert not third.wait(0.2)  # taken, but not yet done with
    queue.release(b"a" * 4)
    assert third.wait(WAIT)
    assert [queue.get(), queue.get()] == [b"b" * 6, b"c" * 3]


def test_a_chunk_larger_than_the_bound_is_taken_when_the_queue_holds_nothing() -> None:
    queue = lanes.ByteQueue(limit=10)
    queue.put(b"x" * 50)
    assert queue.get() == b"x" * 50


def test_the_end_is_taken_even_when_the_queue_is_full() -> None:
    queue = lanes.ByteQueue(limit=10)
    queue.put(b"a" * 10)
    assert _put_in_thread(queue, None).wait(WAIT)
    assert [queue.get(), queue.get()] == [b"a" * 10, None]


def test_a_lane_that_failed_drains_its_queue_without_working_and_gives_every_chunk_back(
        ) -> None:
    seen: list[Buffer] = []
    done: list[Buffer] = []

    def fail_on_first(chunk: Buffer) -> None:
        seen.append(chunk)
        raise OSError(28, "No space left on device")

    lane = lanes.Lane("test-lane", [fail_on_first], done.append, limit=4)
    lane.start()
    for chunk in (b"xx", b"yy", b"zz", b"ww"):  # more than its bound: it keeps draining
        lane.queue.put(chunk)
    lane.queue.put(None)
    lane.join(WAIT)
    assert isinstance(lane.error, OSError)
    assert seen == [b"xx"]
    assert done == [b"xx", b"yy", b"zz", b"ww"]


class HeldSink:
    """A file-like sink whose first write waits for ``go``."""

    def __init__(self) -> None:
        self.got: list[bytes] = []
        self.go = threading.Event()
        self.started = threading.Event()

    def write(self, data: Buffer, /) -> int:
        self.started.set()
        assert self.go.wait(WAIT)
        self.got.append(bytes(data))
        return len(data)


@pytest.mark.parametrize("limit", [4 * 65536, 2 * 65536])
def test_a_download_holds_at_most_its_bytes_in_each_lane(limit: int) -> None:
    """The chunk being written counts: with the sink stalled on the first chunk of 64 KiB,
    the reader is held back once ``limit`` bytes are in the writer's lane."""
    sink = HeldSink()
    writer = verify.VerifyingWriter(sink, verify.ImageVerifier(ImageMeta(id="img")),
                                    limit=limit)
    accepted: list[int] = []

    def feed() -> None:
        for n in range(8):
            writer.write(bytes([n]) * 65536)
            accepted.append(n)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    assert sink.started.wait(WAIT)
    assert _settled(lambda: len(accepted), limit // 65536) == limit // 65536
    sink.go.set()
    feeder.join(WAIT)
    writer.close()
    assert sink.got == [bytes([n]) * 65536 for n in range(8)]
