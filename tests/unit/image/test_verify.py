"""Unit tests of one-pass image verification (fleetcache.image.verify)."""

from __future__ import annotations

import ctypes
import errno
import gc
import hashlib
import io
import mmap
import os
import threading
import weakref
from unittest import mock

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.image import verify
from fleetcache.image.chunks import ChunkPool, receive_buffer
from fleetcache.image.source import (
    Buffer,
    ImageMeta,
    ImageSource,
    ProgressCallback,
    Writer,
)
from tests.unit.image.fixtures import buffers_cannot_be_mapped

DATA = b"fleetcache" * 100_000


def _meta(data: bytes = DATA, **fields: object) -> ImageMeta:
    values: dict[str, object] = {
        "id": "img", "size": len(data), "checksum": hashlib.md5(data).hexdigest(),
        "os_hash_algo": "sha512", "os_hash_value": hashlib.sha512(data).hexdigest(),
    }
    values.update(fields)
    return ImageMeta(**values)  # type: ignore[arg-type]


class ChunkSource(ImageSource):
    """Serves fixed bytes in small chunks; remembers the writing threads."""

    def __init__(self, data: bytes, fail_after: int | None = None) -> None:
        self.data, self.fail_after = data, fail_after

    def download(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                 progress: ProgressCallback | None = None) -> int:
        for i in range(0, len(self.data), 65536):
            if self.fail_after is not None and i >= self.fail_after:
                raise exception.ImageFetchError(image_id=meta.id, reason="connection lost")
            writer.write(self.data[i:i + 65536])
        return len(self.data)


def test_multihash_is_preferred_over_checksum() -> None:
    assert verify.expected_hash(_meta()) == ("sha512", hashlib.sha512(DATA).hexdigest())


def test_checksum_is_the_fallback() -> None:
    meta = _meta(os_hash_algo=None, os_hash_value=None)
    assert verify.expected_hash(meta) == ("md5", hashlib.md5(DATA).hexdigest())


def test_unknown_algorithm_falls_back_to_checksum_or_fails() -> None:
    assert verify.expected_hash(_meta(os_hash_algo="nohash9"))[0] == "md5"  # type: ignore[index]
    with pytest.raises(exception.ImageFetchError, match="'nohash9' is not available"):
        verify.expected_hash(_meta(os_hash_algo="nohash9", checksum=None))


def test_no_hash_at_all_checks_size_only() -> None:
    verifier = verify.ImageVerifier(_meta(os_hash_algo=None, os_hash_value=None, checksum=None))
    verifier.update(DATA)
    verifier.verify()
    assert verifier.hexdigest() is None


def test_size_mismatch_names_both_sizes() -> None:
    verifier = verify.ImageVerifier(_meta())
    verifier.update(DATA[:-1])
    with pytest.raises(exception.ImageFetchError,
                       match=f"size mismatch: got {len(DATA) - 1} bytes, expected {len(DATA)}"):
        verifier.verify()


def test_hash_mismatch_names_algorithm_and_digests() -> None:
    corrupt = DATA[:10] + b"X" + DATA[11:]
    verifier = verify.ImageVerifier(_meta())
    verifier.update(corrupt)
    with pytest.raises(exception.ImageFetchError, match="sha512 mismatch: got [0-9a-f]{128}, "):
        verifier.verify()


def test_md5_mismatch_is_detected() -> None:
    verifier = verify.ImageVerifier(_meta(os_hash_algo=None, os_hash_value=None,
                                          checksum="0" * 32))
    verifier.update(DATA)
    with pytest.raises(exception.ImageFetchError, match="md5 mismatch"):
        verifier.verify()


def test_download_verified_writes_and_verifies_in_one_pass() -> None:
    out = io.BytesIO()
    assert verify.download_verified(ChunkSource(DATA), RequestContext(), _meta(), out) == len(DATA)
    assert out.getvalue() == DATA


def test_download_verified_fails_on_corrupt_bytes() -> None:
    corrupt = DATA[:-1] + b"?"
    with pytest.raises(exception.ImageFetchError, match="sha512 mismatch"):
        verify.download_verified(ChunkSource(corrupt), RequestContext(), _meta(), io.BytesIO())


def test_writer_hashes_and_writes_beside_the_reader_on_two_threads() -> None:
    writers: set[str] = set()
    hashers: set[str] = set()

    class Sink(io.BytesIO):
        def write(self, data: bytes, /) -> int:  # type: ignore[override]
            writers.add(threading.current_thread().name)
            return super().write(data)

    verifier = verify.ImageVerifier(_meta())
    update = verifier.update

    def spy(data: bytes) -> None:
        hashers.add(threading.current_thread().name)
        update(data)

    verifier.update = spy  # type: ignore[method-assign]
    writer = verify.VerifyingWriter(Sink(), verifier)
    for start in range(0, len(DATA), 65536):
        writer.write(DATA[start:start + 65536])
    writer.close()
    verifier.verify()
    assert (writers, hashers) == ({"image-writer"}, {"image-hash"})


def test_abort_stops_both_workers_without_raising() -> None:
    before = threading.active_count()
    writer = verify.VerifyingWriter(io.BytesIO(), verify.ImageVerifier(_meta()))
    writer.write(DATA)
    writer.abort()
    assert threading.active_count() == before


def test_a_worker_that_cannot_start_stops_the_one_started() -> None:
    before = threading.active_count()
    real_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        if thread.name == "image-writer":
            raise RuntimeError("can't start new thread")
        real_start(thread)

    with mock.patch.object(threading.Thread, "start", start), \
            pytest.raises(RuntimeError, match="new thread"):
        verify.VerifyingWriter(io.BytesIO(), verify.ImageVerifier(_meta()))
    assert threading.active_count() == before


def test_observer_error_stops_the_download() -> None:
    def refuse(chunk: bytes) -> None:
        raise exception.ImageFormatRejected(image_id="x", reason="not raw")

    with pytest.raises(exception.ImageFormatRejected, match="not raw"):
        verify.download_verified(ChunkSource(DATA * 20), RequestContext(), _meta(DATA * 20),
                                 io.BytesIO(), observers=[refuse])


def test_sink_error_stops_the_download() -> None:
    class Full(io.BytesIO):
        def write(self, data: bytes, /) -> int:  # type: ignore[override]
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        verify.download_verified(ChunkSource(DATA * 20), RequestContext(), _meta(DATA * 20),
                                 Full())


def test_source_error_propagates_and_stops_the_writer() -> None:
    before = threading.active_count()
    with pytest.raises(exception.ImageFetchError, match="connection lost"):
        verify.download_verified(ChunkSource(DATA, fail_after=200_000), RequestContext(),
                                 _meta(), io.BytesIO())
    assert threading.active_count() == before


def test_receive_buffers_are_page_aligned_and_reused_once_both_workers_are_done() -> None:
    out = io.BytesIO()
    writer = verify.VerifyingWriter(out, verify.ImageVerifier(_meta()))
    first = receive_buffer(writer, 65536)
    address = ctypes.addressof(ctypes.c_char.from_buffer(first))
    assert address % mmap.PAGESIZE == 0
    first[:] = DATA[:65536]
    writer.write(first)
    writer.close()  # both workers are done with it
    again = receive_buffer(writer, 65536)
    assert ctypes.addressof(ctypes.c_char.from_buffer(again)) == address
    assert out.getvalue() == DATA[:65536]


@pytest.mark.parametrize(("code", "raised"), [(errno.ENOMEM, MemoryError),
                                              (errno.EPERM, PermissionError)])
def test_only_a_buffer_the_host_has_no_memory_for_is_a_memory_error(
        code: int, raised: type[BaseException], monkeypatch: pytest.MonkeyPatch) -> None:
    """``ENOMEM`` is the host's failure, not the transfer's (the sources take an ``OSError``
    of a read for a transient one); any other error of ``mmap`` stays what it is."""
    buffers_cannot_be_mapped(monkeypatch, code)
    with pytest.raises(raised):
        ChunkPool().acquire(65536)


def test_a_receive_buffer_dropped_unwritten_is_lent_again() -> None:
    """A source that drops a read (a failed one, the one that found the end, bytes a server
    that ignored ``Range`` sent again) takes no new buffer for the next one."""
    out = io.BytesIO()
    writer = verify.VerifyingWriter(out, verify.ImageVerifier(_meta()))
    addresses = set()
    for _ in range(100):  # 100 dropped reads: one buffer
        dropped = receive_buffer(writer, 65536)
        addresses.add(ctypes.addressof(ctypes.c_char.from_buffer(dropped)))
        del dropped
    assert len(addresses) == 1
    kept = receive_buffer(writer, 65536)
    kept[:] = DATA[:65536]
    writer.write(kept[:1000])  # a slice of it is handed on: it is no longer lent
    other = receive_buffer(writer, 65536)
    assert other.obj is not kept.obj
    writer.close()
    assert out.getvalue() == DATA[:1000]


def test_a_receive_buffer_is_not_reused_while_a_worker_still_reads_it() -> None:
    gate = threading.Event()
    verifier = verify.ImageVerifier(_meta())
    update = verifier.update

    def slow(data: bytes) -> None:
        gate.wait(10)
        update(data)

    verifier.update = slow  # type: ignore[method-assign]
    out = io.BytesIO()
    writer = verify.VerifyingWriter(out, verifier)
    chunks = []
    for start in range(0, len(DATA), 65536):
        buf = receive_buffer(writer, 65536)
        piece = DATA[start:start + 65536]
        buf[:len(piece)] = piece
        chunks.append(buf.obj)
        writer.write(buf[:len(piece)])
        if start == 65536 * 3:
            gate.set()  # the hash lane was still on the first chunk until now
    writer.close()
    verifier.verify()  # every chunk hashed as it was written: none was refilled under it
    assert out.getvalue() == DATA
    assert len({id(c) for c in chunks[:4]}) == 4


def test_an_aligned_sink_gets_chunks_of_whole_pages_copied_into_pool_buffers_by_the_caller(
        ) -> None:
    copiers: set[str] = set()
    got: list[Buffer] = []

    class Sink(io.BytesIO):
        def write(self, data: Buffer, /) -> int:  # type: ignore[override]
            got.append(data)
            return super().write(data)

    pool_copy = ChunkPool.copy_in

    def spy(pool: ChunkPool, chunk: Buffer) -> Buffer:
        copiers.add(threading.current_thread().name)
        return pool_copy(pool, chunk)

    sink = Sink()
    writer = verify.VerifyingWriter(sink, verify.ImageVerifier(_meta()), aligned_sink=True,
                                    limit=4 * 65536)  # four chunks queued: buffers reused
    with mock.patch.object(ChunkPool, "copy_in", spy):
        for start in range(0, len(DATA), 65536):  # 15 chunks of 16 pages, then 16,960 bytes
            writer.write(DATA[start:start + 65536])
        writer.close()
    writer.verifier.verify()
    assert sink.getvalue() == DATA
    assert copiers == {threading.current_thread().name}
    whole, tail = got[:-1], got[-1]
    assert all(isinstance(c, memoryview) and c.obj.__class__ is mmap.mmap
               and ctypes.addressof(ctypes.c_char.from_buffer(c)) % mmap.PAGESIZE == 0
               for c in whole)
    assert len({id(c.obj) for c in whole}) < len(whole)  # reused, not one per chunk
    assert isinstance(tail, bytes) and len(tail) == len(DATA) % 65536  # staged by the sink


def test_a_sink_that_is_not_aligned_gets_the_chunks_as_they_came() -> None:
    got: list[Buffer] = []

    class Sink(io.BytesIO):
        def write(self, data: Buffer, /) -> int:  # type: ignore[override]
            got.append(data)
            return super().write(data)

    writer = verify.VerifyingWriter(Sink(), verify.ImageVerifier(_meta()))
    chunks = [DATA[start:start + 65536] for start in range(0, len(DATA), 65536)]
    for chunk in chunks:
        writer.write(chunk)
    writer.close()
    assert [id(c) for c in got] == [id(c) for c in chunks]


def test_receive_buffer_of_a_plain_writer_is_a_fresh_bytearray() -> None:
    view = receive_buffer(io.BytesIO(), 100)
    assert isinstance(view.obj, bytearray) and len(view) == 100


def test_buffers_come_back_after_an_error_or_an_abort() -> None:
    class Full(io.BytesIO):
        def write(self, data: bytes, /) -> int:  # type: ignore[override]
            raise OSError(28, "No space left on device")

    writer = verify.VerifyingWriter(Full(), verify.ImageVerifier(_meta()))
    buf = receive_buffer(writer, 4096)
    writer.write(buf)
    with pytest.raises(OSError, match="No space left"):
        writer.close()
    assert receive_buffer(writer, 4096).obj is buf.obj
    aborted = verify.VerifyingWriter(io.BytesIO(), verify.ImageVerifier(_meta()))
    buf = receive_buffer(aborted, 4096)
    aborted.write(buf)
    aborted.abort()
    assert receive_buffer(aborted, 4096).obj is buf.obj


def test_the_buffers_go_with_the_writer_without_waiting_for_the_cycle_collector() -> None:
    writer = verify.VerifyingWriter(io.BytesIO(), verify.ImageVerifier(_meta()))
    buf = receive_buffer(writer, 65536)
    buf[:] = DATA[:65536]
    writer.write(buf)
    writer.close()
    pool = weakref.ref(writer._pool)
    del buf
    gc.disable()
    try:
        del writer
        assert pool() is None  # freed by reference counting: no cycle holds its 4 MiB buffers
    finally:
        gc.enable()


class AffinitySpy:
    """``os.sched_getaffinity`` of a host of ``cpus`` CPUs and a ``sched_setaffinity`` that
    records each call as (thread name, CPUs); ``refuse``: it raises instead, as the kernel
    does when a cgroup's CPU set no longer allows them."""

    def __init__(self, cpus: int, refuse: bool = False) -> None:
        self.allowed, self.refuse = set(range(cpus)), refuse
        self.calls: list[tuple[str, set[int]]] = []

    def get(self, pid: int) -> set[int]:
        assert pid == 0
        return set(self.allowed)

    def set(self, pid: int, cpus: object) -> None:
        assert pid == 0
        self.calls.append((threading.current_thread().name, set(cpus)))  # type: ignore[call-overload]
        if self.refuse:
            raise OSError(22, "Invalid argument")


@pytest.fixture
def affinity(request: pytest.FixtureRequest) -> AffinitySpy:
    spy = AffinitySpy(*getattr(request, "param", (4,)))
    with mock.patch("os.sched_getaffinity", spy.get), mock.patch("os.sched_setaffinity",
                                                                  spy.set):
        yield spy  # type: ignore[misc]


def test_a_verified_download_hashes_on_one_cpu_and_receives_and_writes_on_the_others(
        affinity: AffinitySpy) -> None:
    caller = threading.current_thread().name
    out = io.BytesIO()
    assert verify.download_verified(ChunkSource(DATA), RequestContext(), _meta(), out,
                                    hash_cpus=verify.HashCpus()) == len(DATA)
    assert out.getvalue() == DATA
    mine = [cpus for name, cpus in affinity.calls if name == caller]
    assert mine == [{0, 1, 2}, {0, 1, 2, 3}]  # confined while receiving, then restored
    assert [cpus for name, cpus in affinity.calls if name == "image-writer"] == [{0, 1, 2}]
    assert [cpus for name, cpus in affinity.calls if name == "image-hash"] == [{3}]


def test_the_receiving_thread_gets_its_cpus_back_after_a_failed_download(
        affinity: AffinitySpy) -> None:
    with pytest.raises(exception.ImageFetchError, match="connection lost"):
        verify.download_verified(ChunkSource(DATA, fail_after=65536 * 3), RequestContext(),
                                 _meta(), io.BytesIO(), hash_cpus=verify.HashCpus())
    caller = threading.current_thread().name
    assert [cpus for name, cpus in affinity.calls if name == caller] == [{0, 1, 2},
                                                                         {0, 1, 2, 3}]


def test_a_download_without_a_hash_confines_nothing(affinity: AffinitySpy) -> None:
    meta = _meta(os_hash_algo=None, os_hash_value=None, checksum=None)
    verify.download_verified(ChunkSource(DATA), RequestContext(), meta, io.BytesIO(),
                             hash_cpus=verify.HashCpus())
    assert affinity.calls == []


def test_concurrent_downloads_hash_on_cpus_of_their_own_while_two_are_free(
        affinity: AffinitySpy) -> None:
    cpus = verify.HashCpus()
    with cpus.lease() as first, cpus.lease() as second, cpus.lease() as third, \
            cpus.lease() as fourth:
        assert first == verify.CpuSplit(hash=frozenset({3}), others=frozenset({0, 1, 2}))
        assert second == verify.CpuSplit(hash=frozenset({2}), others=frozenset({0, 1}))
        assert third == verify.CpuSplit(hash=frozenset({1}), others=frozenset({0}))
        assert fourth is None  # one CPU left free: nothing confined
    with cpus.lease() as again:  # each lease gave its CPU back
        assert again is not None and again.hash == {3}


def test_a_download_without_the_process_cpus_confines_nothing(affinity: AffinitySpy) -> None:
    verify.download_verified(ChunkSource(DATA), RequestContext(), _meta(), io.BytesIO())
    assert affinity.calls == []


@pytest.mark.parametrize("affinity", [(1,)], indirect=True)
def test_a_thread_on_one_cpu_is_left_alone(affinity: AffinitySpy) -> None:
    with verify.HashCpus().lease() as split:
        assert split is None
    verify.download_verified(ChunkSource(DATA), RequestContext(), _meta(), io.BytesIO(),
                             hash_cpus=verify.HashCpus())
    assert affinity.calls == []


@pytest.mark.parametrize("affinity", [(2, True)], indirect=True)
def test_a_refused_affinity_does_not_fail_the_download(affinity: AffinitySpy) -> None:
    out = io.BytesIO()
    assert verify.download_verified(ChunkSource(DATA), RequestContext(), _meta(), out,
                                    hash_cpus=verify.HashCpus()) == len(DATA)
    caller = threading.current_thread().name
    # refused at once: nothing to restore
    assert [cpus for name, cpus in affinity.calls if name == caller] == [{0}]


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda pid: ())(0)) < 2,
                    reason="needs two CPUs")
def test_on_this_host_the_hash_keeps_to_the_highest_cpu_and_the_others_leave_it() -> None:
    before = os.sched_getaffinity(0)
    highest = max(before)
    seen: dict[str, set[int]] = {}

    class Sink(io.BytesIO):
        def write(self, data: bytes, /) -> int:  # type: ignore[override]
            seen.setdefault(threading.current_thread().name, os.sched_getaffinity(0))
            return super().write(data)

    class Verifier(verify.ImageVerifier):
        def update(self, data: Buffer) -> None:
            seen.setdefault(threading.current_thread().name, os.sched_getaffinity(0))
            super().update(data)

    class Source(ChunkSource):
        def download(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                     progress: ProgressCallback | None = None) -> int:
            seen["receiver"] = os.sched_getaffinity(0)
            return super().download(ctxt, meta, writer, progress)

    with mock.patch.object(verify, "ImageVerifier", Verifier):
        verify.download_verified(Source(DATA), RequestContext(), _meta(), Sink(),
                                 hash_cpus=verify.HashCpus())
    assert seen == {"receiver": before - {highest}, "image-writer": before - {highest},
                    "image-hash": {highest}}
    assert os.sched_getaffinity(0) == before
