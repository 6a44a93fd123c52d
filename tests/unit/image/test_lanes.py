"""Unit tests of a verified download's worker lanes (fleetcache.image.lanes) and of the
writer's chunks handed to a file together (fleetcache.image.verify)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence

import pytest

from fleetcache.common.context import RequestContext
from fleetcache.image import lanes, verify
from fleetcache.image.source import (
    Buffer,
    ImageMeta,
    ImageSource,
    ProgressCallback,
    VectorWriter,
    Writer,
)

WAIT = 5.0


def _put_in_thread(queue: lanes.ByteQueue, item: Buffer | None) -> threading.Event:
    put = threading.Event()

    def run() -> None:
        queue.put(item)
        put.set()

    threading.Thread(target=run, daemon=True).start()
    return put


def test_a_queue_holds_at_most_its_bytes_and_the_reader_waits_for_room() -> None:
    queue = lanes.ByteQueue(limit=10)
    queue.put(b"a" * 4)
    queue.put(b"b" * 6)
    third = _put_in_thread(queue, b"c" * 3)
    assert not third.wait(0.2)  # 13 bytes would not fit
    assert queue.get() == [b"a" * 4]
    assert not third.wait(0.2)  # taken, but not yet done with
    queue.release([b"a" * 4])
    assert third.wait(WAIT)
    assert queue.get(most=100) == [b"b" * 6, b"c" * 3]


def test_a_chunk_larger_than_the_bound_is_taken_when_the_queue_is_empty() -> None:
    queue = lanes.ByteQueue(limit=10)
    queue.put(b"x" * 50)
    assert queue.get() == [b"x" * 50]


def test_the_end_is_taken_even_when_the_queue_is_full_and_comes_last() -> None:
    queue = lanes.ByteQueue(limit=10)
    queue.put(b"a" * 10)
    assert _put_in_thread(queue, None).wait(WAIT)
    assert queue.get(most=100) == [b"a" * 10, None]


def test_get_takes_the_chunks_queued_within_most_bytes_the_first_whatever_its_size() -> None:
    queue = lanes.ByteQueue(limit=100)
    for chunk in (b"a" * 8, b"b" * 4, b"c" * 4, b"d" * 1):
        queue.put(chunk)
    assert queue.get(most=5) == [b"a" * 8]
    assert queue.get(most=8) == [b"b" * 4, b"c" * 4]
    assert queue.get() == [b"d"]


def test_a_lane_shows_each_chunk_to_its_steps_then_hands_the_chunks_taken_together_on(
        ) -> None:
    seen: list[Buffer] = []
    batches: list[list[Buffer]] = []
    done: list[Buffer] = []
    lane = lanes.Lane("test-lane", [seen.append], done.append,
                      batch=lambda chunks: batches.append(list(chunks)))
    for chunk in (b"1", b"22", b"333"):
        lane.queue.put(chunk)
    lane.queue.put(None)
    lane.start()
    lane.join(WAIT)
    assert seen == [b"1", b"22", b"333"]
    assert batches == [[b"1", b"22", b"333"]]  # all queued before it started: one batch
    assert done == [b"1", b"22", b"333"]
    assert lane.error is None


def test_a_lane_that_failed_drains_its_queue_without_working_and_gives_every_chunk_back(
        ) -> None:
    batches: list[list[Buffer]] = []
    done: list[Buffer] = []

    def fail_once(chunks: Sequence[Buffer]) -> None:
        batches.append(list(chunks))
        raise OSError(28, "No space left on device")

    lane = lanes.Lane("test-lane", [], done.append, batch=fail_once,
                      limit=2 * lanes.BATCH_BYTES)
    lane.queue.put(b"x" * lanes.BATCH_BYTES)  # alone in its batch: the next would not fit
    lane.queue.put(b"y")
    lane.queue.put(None)
    lane.start()
    lane.join(WAIT)
    assert isinstance(lane.error, OSError)
    assert batches == [[b"x" * lanes.BATCH_BYTES]]
    assert done == [b"x" * lanes.BATCH_BYTES, b"y"]


class HeldVectorSink:
    """A file-like sink that takes chunks together; its first call waits for ``go``."""

    def __init__(self) -> None:
        self.calls: list[list[bytes]] = []
        self.go = threading.Event()
        self.started = threading.Event()

    def write(self, data: Buffer, /) -> int:
        return self.writev([data])

    def writev(self, chunks: Sequence[Buffer], /) -> int:
        self.started.set()
        assert self.go.wait(WAIT)
        self.calls.append([bytes(c) for c in chunks])
        return sum(len(c) for c in chunks)


class Chunks(ImageSource):
    def __init__(self, chunks: list[bytes], sink: HeldVectorSink) -> None:
        self.chunks, self.sink = chunks, sink

    def download(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                 progress: ProgressCallback | None = None) -> int:
        writer.write(self.chunks[0])
        assert self.sink.started.wait(WAIT)  # the writer thread holds the first chunk
        for chunk in self.chunks[1:]:
            writer.write(chunk)
        self.sink.go.set()
        return sum(len(c) for c in self.chunks)


def test_chunks_queued_while_the_sink_writes_reach_it_in_one_call() -> None:
    chunks = [bytes([n]) * 65536 for n in range(6)]
    data = b"".join(chunks)
    meta = ImageMeta(id="img", size=len(data), os_hash_algo="sha512",
                     os_hash_value=hashlib.sha512(data).hexdigest())
    sink = HeldVectorSink()
    assert isinstance(sink, VectorWriter)
    assert verify.download_verified(Chunks(chunks, sink), RequestContext(), meta,
                                    sink) == len(data)
    assert sink.calls == [chunks[:1], chunks[1:]]


def test_a_plain_writer_still_gets_one_write_per_chunk() -> None:
    got: list[bytes] = []

    class Plain:
        def write(self, data: Buffer, /) -> int:
            got.append(bytes(data))
            return len(data)

    sink = Plain()
    assert not isinstance(sink, VectorWriter)
    writer = verify.VerifyingWriter(sink, verify.ImageVerifier(ImageMeta(id="img", size=3)))
    for chunk in (b"a", b"b", b"c"):
        writer.write(chunk)
    writer.close()
    assert got == [b"a", b"b", b"c"]


def _settled(count: Callable[[], int], expected: int) -> int:
    """``count()`` once it reached ``expected`` (or after WAIT) and stayed a moment."""
    deadline = time.monotonic() + WAIT
    while count() < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # anything beyond ``expected`` would have come by now
    return count()


@pytest.mark.parametrize("limit", [4 * 65536, 2 * 65536])
def test_a_download_holds_at_most_its_bytes_in_each_lane(limit: int) -> None:
    """The chunk being written counts: with the sink stalled on the first chunk of 64 KiB,
    the reader is held back once ``limit`` bytes are in the writer's lane."""
    sink = HeldVectorSink()
    writer = verify.VerifyingWriter(sink, verify.ImageVerifier(ImageMeta(id="img")),
                                    limit=limit)
    accepted: list[int] = []

    def feed() -> None:
        for n in range(8):
            writer.write(bytes([n]) * 65536)
            accepted.append(n)
            if n == 0:  # the writer thread holds the first chunk alone
                assert sink.started.wait(WAIT)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    assert _settled(lambda: len(accepted), limit // 65536) == limit // 65536
    sink.go.set()
    feeder.join(WAIT)
    writer.close()
    assert [len(c) for call in sink.calls for c in call] == [65536] * 8


def test_a_batch_in_work_counts_until_it_is_done() -> None:
    queue = lanes.ByteQueue(limit=10)
    queue.put(b"a" * 6)
    taken = queue.get()
    waiting = _put_in_thread(queue, b"b" * 6)
    assert not waiting.wait(0.2)  # 6 bytes in work and 6 more would not fit
    queue.release([c for c in taken if c is not None])
    assert waiting.wait(WAIT)
