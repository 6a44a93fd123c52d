"""Unit tests of the download's file sink (fleetcache.compute.imagecache.odirect), on the real
file system of ``tmp_path`` (ext4 here: it takes O_DIRECT)."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import pathlib
from typing import Any

import pytest

from fleetcache.compute.imagecache import odirect
from tests.unit.image.fixtures import buffers_cannot_be_mapped

ALIGN = odirect.ALIGN


def refuse_o_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``fcntl`` refuse O_DIRECT with EINVAL, as a file system without it does."""
    real = fcntl.fcntl

    def fake(fd: int, cmd: int, arg: int = 0) -> Any:
        if cmd == fcntl.F_SETFL and arg & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, cmd, arg)

    monkeypatch.setattr(odirect.fcntl, "fcntl", fake)


def _aligned_chunk(size: int, fill: int) -> memoryview:
    buf = mmap.mmap(-1, size)
    buf.write(bytes([fill]) * size)
    return memoryview(buf)


def _address(view: memoryview) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(view))


def _o_direct(fd: int) -> bool:
    return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)


#: One writev(2) of the sink: ((buffer address, length) of each buffer, O_DIRECT on then).
Call = tuple[tuple[tuple[int, int], ...], bool]


@pytest.fixture
def spy_calls(monkeypatch: pytest.MonkeyPatch) -> list[Call]:
    """Every writev(2) of the sink."""
    calls: list[Call] = []
    real = os.writev

    def writev(fd: int, buffers: Any) -> int:
        views = [memoryview(b) for b in buffers]
        calls.append((tuple((_address(v) if not v.readonly else -1, len(v)) for v in views),
                      _o_direct(fd)))
        return real(fd, buffers)

    monkeypatch.setattr(odirect.os, "writev", writev)
    return calls


def singles(calls: list[Call]) -> list[tuple[int, int, bool]]:
    """``calls`` each of one buffer, as (address, length, O_DIRECT on)."""
    assert all(len(buffers) == 1 for buffers, _ in calls), calls
    return [(*buffers[0], direct) for buffers, direct in calls]


def test_aligned_chunks_are_written_as_they_are_with_o_direct(
        tmp_path: pathlib.Path, spy_calls: list[Call]) -> None:
    chunks = [_aligned_chunk(64 * ALIGN, n) for n in (1, 2, 3)]
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        assert isinstance(sink, odirect.ODirectWriter)
        for chunk in chunks:
            sink.write(chunk)
        sink.finish()
    # The chunks' own memory went to the disk: no staging copy.
    assert singles(spy_calls) == [(_address(c), len(c), True) for c in chunks]
    assert (tmp_path / "base").read_bytes() == b"".join(bytes(c) for c in chunks)


def test_unaligned_tail_is_written_without_o_direct_after_the_aligned_part(
        tmp_path: pathlib.Path, spy_calls: list[Call]) -> None:
    head = _aligned_chunk(4 * ALIGN, 7)
    tail = _aligned_chunk(4 * ALIGN, 9)[:ALIGN + 1000]  # aligned start, unaligned length
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        sink.write(head)
        sink.write(tail)
        sink.finish()
        assert not _o_direct(f.fileno())
    assert [(n, direct) for _, n, direct in singles(spy_calls)] == [
        (4 * ALIGN, True), (ALIGN, True), (1000, False)]
    assert (tmp_path / "base").read_bytes() == bytes(head) + bytes(tail)


def test_bytes_of_any_size_are_staged_into_aligned_direct_writes(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
        spy_calls: list[Call]) -> None:
    monkeypatch.setattr(odirect, "STAGE", 4 * ALIGN)
    data = os.urandom(10 * ALIGN + 123)
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        for start in range(0, len(data), 3000):  # bytes: their address is not known
            sink.write(data[start:start + 3000])
        sink.finish()
    assert [(n, direct) for _, n, direct in singles(spy_calls)] == [
        (4 * ALIGN, True), (4 * ALIGN, True), (2 * ALIGN, True), (123, False)]
    assert all(address % ALIGN == 0 for address, _, direct in singles(spy_calls) if direct)
    assert (tmp_path / "base").read_bytes() == data


def test_file_system_without_o_direct_gets_buffered_writes(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_o_direct(monkeypatch)
    data = os.urandom(3 * ALIGN + 5)
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        assert not isinstance(sink, odirect.ODirectWriter)
        sink.write(data[:100])
        sink.write(data[100:])
        sink.finish()
        assert not _o_direct(f.fileno())
    assert (tmp_path / "base").read_bytes() == data


def refuse_first_direct_write(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """Make the first writev(2) with O_DIRECT on fail with EINVAL, as a file system that
    takes the flag but not a given write does; :returns: the lengths of its buffers."""
    real = os.writev
    refused: list[list[int]] = []

    def writev(fd: int, buffers: Any) -> int:
        if _o_direct(fd) and not refused:
            refused.append([len(b) for b in buffers])
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, buffers)

    monkeypatch.setattr(odirect.os, "writev", writev)
    return refused


def test_a_refused_direct_write_turns_o_direct_off_for_the_rest(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refused = refuse_first_direct_write(monkeypatch)
    chunks = [_aligned_chunk(8 * ALIGN, n) for n in (4, 5)]
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        for chunk in chunks:
            sink.write(chunk)
        sink.finish()
        assert not _o_direct(f.fileno())
    assert refused == [[8 * ALIGN]]
    assert (tmp_path / "base").read_bytes() == b"".join(bytes(c) for c in chunks)


def test_other_write_errors_are_raised(tmp_path: pathlib.Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, buffers: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(odirect.os, "writev", full)
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        with pytest.raises(OSError, match="No space left"):
            sink.write(_aligned_chunk(ALIGN, 1))


def test_aligned_chunks_map_no_staging_buffer(tmp_path: pathlib.Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    chunk = _aligned_chunk(2 * ALIGN, 7)  # mapped before no mapping is possible

    def refused(*args: object) -> object:
        raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))

    monkeypatch.setattr(mmap, "mmap", refused)  # any mapping at all, wherever made
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        assert isinstance(sink, odirect.ODirectWriter)
        sink.write(chunk)
        sink.finish()
    assert (tmp_path / "base").read_bytes() == bytes(chunk)


@pytest.mark.parametrize(("code", "error"), [(errno.ENOMEM, MemoryError),
                                             (errno.EACCES, PermissionError)])
def test_a_staging_buffer_that_cannot_be_mapped(tmp_path: pathlib.Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                code: int, error: type[Exception]) -> None:
    """Out of memory is ``MemoryError`` (the image cache says so), not a write error; any
    other ``mmap`` failure stays an ``OSError``."""
    buffers_cannot_be_mapped(monkeypatch, code)
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        with pytest.raises(error):
            sink.write(b"tail")


def test_chunks_handed_together_go_to_the_disk_in_one_call_from_their_own_memory(
        tmp_path: pathlib.Path, spy_calls: list[Call]) -> None:
    chunks = [_aligned_chunk(16 * ALIGN, n) for n in (1, 2, 3)]
    tail = b"the image's last 33 bytes, staged"
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        assert sink.writev([*chunks, tail]) == 3 * 16 * ALIGN + len(tail)
        sink.finish()
    assert spy_calls[0] == (tuple((_address(c), len(c)) for c in chunks), True)
    assert [(sum(n for _, n in buffers), direct) for buffers, direct in spy_calls[1:]] == [
        (len(tail), False)]
    assert (tmp_path / "base").read_bytes() == b"".join(bytes(c) for c in chunks) + tail


def test_a_short_vectored_write_goes_on_from_the_byte_it_stopped_at(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.writev
    sizes: list[int] = []

    def short(fd: int, buffers: Any) -> int:  # the disk takes 1.5 chunks per call at most
        views = [memoryview(b) for b in buffers]
        sizes.append(sum(len(v) for v in views))
        return real(fd, [views[0], views[1][:len(views[1]) // 2]] if len(views) > 1
                    else views)

    monkeypatch.setattr(odirect.os, "writev", short)
    chunks = [_aligned_chunk(8 * ALIGN, n) for n in (4, 5, 6)]
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        sink.writev(chunks)
        sink.finish()
    assert sizes == [24 * ALIGN, 12 * ALIGN, 4 * ALIGN]
    assert (tmp_path / "base").read_bytes() == b"".join(bytes(c) for c in chunks)


def test_chunks_after_a_staged_one_are_staged_behind_it_in_order(
        tmp_path: pathlib.Path, spy_calls: list[Call]) -> None:
    head = b"x" * 100  # bytes: staged, so what follows must not overtake it
    chunks = [_aligned_chunk(ALIGN, n) for n in (7, 8)]
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        sink.write(head)
        sink.writev(chunks)
        sink.finish()
    assert (tmp_path / "base").read_bytes() == head + bytes(chunks[0]) + bytes(chunks[1])
    assert all(address != _address(c) for buffers, _ in spy_calls for address, _ in buffers
               for c in chunks)


def test_a_file_system_without_o_direct_takes_chunks_handed_together(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refuse_o_direct(monkeypatch)
    data = os.urandom(3 * ALIGN + 5)
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        assert sink.writev([data[:7], data[7:]]) == len(data)
        sink.finish()
    assert (tmp_path / "base").read_bytes() == data


def test_an_aligned_chunk_after_a_staged_one_in_the_same_call_is_staged_behind_it(
        tmp_path: pathlib.Path, spy_calls: list[Call]) -> None:
    first, last = _aligned_chunk(2 * ALIGN, 1), _aligned_chunk(2 * ALIGN, 3)
    middle = b"m" * 100  # bytes: staged, so ``last`` must not go to the disk before it
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        sink.writev([first, middle, last])
        sink.finish()
    assert spy_calls[0] == (((_address(first), len(first)),), True)
    assert all(address != _address(last) for buffers, _ in spy_calls for address, _ in buffers)
    assert (tmp_path / "base").read_bytes() == bytes(first) + middle + bytes(last)


def test_a_vectored_write_refused_direct_goes_on_buffered_with_nothing_lost(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refused = refuse_first_direct_write(monkeypatch)
    chunks = [_aligned_chunk(4 * ALIGN, n) for n in (1, 2, 3)]
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        sink.writev(chunks)
        sink.writev(chunks[:1])
        sink.finish()
        assert not _o_direct(f.fileno())
    assert refused == [[4 * ALIGN] * 3]
    assert (tmp_path / "base").read_bytes() == b"".join(bytes(c) for c in [*chunks, chunks[0]])


def test_buffers_beyond_what_one_call_takes_go_in_the_next_calls(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
        spy_calls: list[Call]) -> None:
    monkeypatch.setattr(odirect, "IOV_MAX", 2)
    chunks = [_aligned_chunk(ALIGN, n) for n in (1, 2, 3, 4, 5)]
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        sink.writev(chunks)
        sink.finish()
    assert [len(buffers) for buffers, _ in spy_calls] == [2, 2, 1]
    assert (tmp_path / "base").read_bytes() == b"".join(bytes(c) for c in chunks)
