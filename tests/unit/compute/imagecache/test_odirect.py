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


@pytest.fixture
def spy_writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, bool]]:
    """Every write(2) of the sink: (buffer address, length, O_DIRECT on at that moment)."""
    calls: list[tuple[int, int, bool]] = []
    real = os.write

    def write(fd: int, data: Any) -> int:
        view = memoryview(data)
        address = _address(view) if not view.readonly else -1
        calls.append((address, len(view), _o_direct(fd)))
        return real(fd, data)

    monkeypatch.setattr(odirect.os, "write", write)
    return calls


def test_aligned_chunks_are_written_as_they_are_with_o_direct(
        tmp_path: pathlib.Path, spy_writes: list[tuple[int, int, bool]]) -> None:
    chunks = [_aligned_chunk(64 * ALIGN, n) for n in (1, 2, 3)]
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        assert isinstance(sink, odirect.ODirectWriter)
        for chunk in chunks:
            sink.write(chunk)
        sink.finish()
    # The chunks' own memory went to the disk: no staging copy.
    assert spy_writes == [(_address(c), len(c), True) for c in chunks]
    assert (tmp_path / "base").read_bytes() == b"".join(bytes(c) for c in chunks)


def test_unaligned_tail_is_written_without_o_direct_after_the_aligned_part(
        tmp_path: pathlib.Path, spy_writes: list[tuple[int, int, bool]]) -> None:
    head = _aligned_chunk(4 * ALIGN, 7)
    tail = _aligned_chunk(4 * ALIGN, 9)[:ALIGN + 1000]  # aligned start, unaligned length
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        sink.write(head)
        sink.write(tail)
        sink.finish()
        assert not _o_direct(f.fileno())
    assert [(n, direct) for _, n, direct in spy_writes] == [
        (4 * ALIGN, True), (ALIGN, True), (1000, False)]
    assert (tmp_path / "base").read_bytes() == bytes(head) + bytes(tail)


def test_bytes_of_any_size_are_staged_into_aligned_direct_writes(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
        spy_writes: list[tuple[int, int, bool]]) -> None:
    monkeypatch.setattr(odirect, "STAGE", 4 * ALIGN)
    data = os.urandom(10 * ALIGN + 123)
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        for start in range(0, len(data), 3000):  # bytes: their address is not known
            sink.write(data[start:start + 3000])
        sink.finish()
    assert [(n, direct) for _, n, direct in spy_writes] == [
        (4 * ALIGN, True), (4 * ALIGN, True), (2 * ALIGN, True), (123, False)]
    assert all(address % ALIGN == 0 for address, _, direct in spy_writes if direct)
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


def test_a_refused_direct_write_turns_o_direct_off_for_the_rest(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.write
    refused: list[int] = []

    def write(fd: int, data: Any) -> int:
        if _o_direct(fd) and not refused:
            refused.append(len(data))
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data)

    monkeypatch.setattr(odirect.os, "write", write)
    chunks = [_aligned_chunk(8 * ALIGN, n) for n in (4, 5)]
    with open(tmp_path / "base", "wb") as f:
        sink = odirect.file_sink(f)
        for chunk in chunks:
            sink.write(chunk)
        sink.finish()
        assert not _o_direct(f.fileno())
    assert refused == [8 * ALIGN]
    assert (tmp_path / "base").read_bytes() == b"".join(bytes(c) for c in chunks)


def test_other_write_errors_are_raised(tmp_path: pathlib.Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(odirect.os, "write", full)
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
