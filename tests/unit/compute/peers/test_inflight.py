"""Unit tests of the downloads under way (fleetcache.compute.peers.inflight): their states, the
file a download writes, a growing file read as it grows, and which images serve_images
expects."""

from __future__ import annotations

import os
import pathlib
import threading
import time

import pytest

from fleetcache.compute.peers.inflight import (
    DONE,
    EXPECTED,
    FAILED,
    RUNNING,
    Download,
    DownloadEnded,
    GrowingFile,
    InFlight,
    expect_download,
)
from tests.unit.image.fixtures import make_conf

IMG = "a26887c6-c47b-4654-abb5-dfadf7d3f803"
PREFIX = ".abc.part-"


def test_a_download_is_running_then_done_or_failed() -> None:
    flights = InFlight()
    with flights.downloading(IMG, 10, "/nowhere", PREFIX):
        running = flights.get(IMG)
        assert running is not None and running.state == RUNNING and running.size == 10
    assert flights.get(IMG).state == DONE  # type: ignore[union-attr]

    with pytest.raises(RuntimeError), flights.downloading(IMG, 10, "/nowhere", PREFIX):
        raise RuntimeError("refused")
    failed = flights.get(IMG)
    assert failed is not None and failed.state == FAILED
    assert failed.generation > running.generation


def test_expect_keeps_a_running_download_and_replaces_an_ended_one() -> None:
    flights = InFlight()
    flights.expect(IMG)
    assert flights.get(IMG).state == EXPECTED  # type: ignore[union-attr]
    with flights.downloading(IMG, 10, "/nowhere", PREFIX):
        flights.expect(IMG)
        assert flights.get(IMG).state == RUNNING  # type: ignore[union-attr]
    flights.expect(IMG)
    assert flights.get(IMG).state == EXPECTED  # type: ignore[union-attr]


def test_the_partial_file_is_the_newest_regular_one_never_a_link_or_fifo(
        tmp_path: pathlib.Path) -> None:
    flights = InFlight()
    os.mkfifo(tmp_path / f"{PREFIX}rbd1")
    os.symlink("/etc/passwd", tmp_path / f"{PREFIX}link")
    (tmp_path / "other").write_bytes(b"x")
    with flights.downloading(IMG, 10, str(tmp_path), PREFIX):
        download = flights.get(IMG)
        assert download is not None and download.partial_path() is None
        old, new = tmp_path / f"{PREFIX}old", tmp_path / f"{PREFIX}new"
        old.write_bytes(b"a")
        new.write_bytes(b"b")
        os.utime(old, (1, 1))
        assert download.partial_path() == str(new)
    assert flights.get(IMG).partial_path() is None  # type: ignore[union-attr]


def test_the_conversion_of_a_download_is_never_its_partial_file(tmp_path: pathlib.Path) -> None:
    """A backend that converts (qcow2 -> raw) writes ``<download>.converted`` beside the
    download while it is still running: the newer file, and not the image's bytes."""
    flights = InFlight()
    with flights.downloading(IMG, 10, str(tmp_path), PREFIX):
        download = tmp_path / f"{PREFIX}k3x_9q2z"
        download.write_bytes(b"qcow2")
        os.utime(download, (1, 1))
        (tmp_path / f"{PREFIX}k3x_9q2z.converted").write_bytes(b"raw")
        assert flights.get(IMG).partial_path() == str(download)  # type: ignore[union-attr]


def _growing(tmp_path: pathlib.Path, flights: InFlight, size: int,
             stall: float = 5.0) -> tuple[GrowingFile, pathlib.Path]:
    path = tmp_path / f"{PREFIX}x"
    path.write_bytes(b"")
    download = flights.get(IMG)
    assert download is not None
    fd = os.open(path, os.O_RDONLY)
    return GrowingFile(fd, download, flights, stall), path


def test_a_reader_sees_every_byte_a_writer_thread_appends(tmp_path: pathlib.Path) -> None:
    flights = InFlight()
    data = os.urandom(64 * 1024)
    with flights.downloading(IMG, len(data), str(tmp_path), PREFIX):
        growing, path = _growing(tmp_path, flights, len(data))

        def write() -> None:
            with open(path, "ab") as f:
                for i in range(0, len(data), 4096):
                    f.write(data[i:i + 4096])
                    f.flush()
                    time.sleep(0.001)

        writer = threading.Thread(target=write)
        writer.start()
        got, offset = b"", 0
        while offset < len(data):
            written = growing.wait_beyond(offset)
            got += os.pread(growing.fd, written - offset, offset)
            offset = written
        writer.join()
    assert got == data
    os.close(growing.fd)


def test_a_failed_download_ends_the_reader_short(tmp_path: pathlib.Path) -> None:
    flights = InFlight()
    ended: list[str] = []

    def read(growing: GrowingFile) -> None:
        try:
            growing.wait_beyond(0)
        except DownloadEnded as exc:
            ended.append(str(exc))

    with pytest.raises(RuntimeError), flights.downloading(IMG, 10, str(tmp_path), PREFIX):
        growing, _ = _growing(tmp_path, flights, 10)
        reader = threading.Thread(target=read, args=(growing,))
        reader.start()
        time.sleep(0.1)
        raise RuntimeError("hash mismatch")
    reader.join(5)
    assert ended == ["the download failed"]
    os.close(growing.fd)


def test_an_abandoned_file_or_a_stall_ends_the_reader(tmp_path: pathlib.Path) -> None:
    flights = InFlight()
    with flights.downloading(IMG, 10, str(tmp_path), PREFIX):
        growing, path = _growing(tmp_path, flights, 10, stall=0.2)
        path.write_bytes(b"12345")
        assert growing.wait_beyond(0) == 5
        started = time.monotonic()
        with pytest.raises(DownloadEnded, match="no progress"):
            growing.wait_beyond(5)
        assert 0.15 < time.monotonic() - started < 2
        path.unlink()
        with pytest.raises(DownloadEnded, match="ended at byte 5"):
            growing.wait_beyond(5)
    os.close(growing.fd)


def test_serve_images_expects_only_an_image_without_a_base_with_cut_through(
        tmp_path: pathlib.Path) -> None:
    class Cache:
        def __init__(self) -> None:
            self.in_flight = InFlight()

        def path_for(self, image_id: str) -> str:
            return str(tmp_path / image_id)

    cache = Cache()
    on = make_conf(image_cache__peer_cut_through=True)
    off = make_conf(image_cache__peer_cut_through=False)
    assert not expect_download(off, cache, IMG)
    assert cache.in_flight.get(IMG) is None
    assert expect_download(on, cache, IMG)
    assert cache.in_flight.get(IMG).state == EXPECTED  # type: ignore[union-attr]
    (tmp_path / IMG).write_bytes(b"a converted or unindexed base")
    other = InFlight()
    cache.in_flight = other
    assert not expect_download(on, cache, IMG) and other.get(IMG) is None


def test_a_download_that_will_come_again_is_announced_without_failing_in_between() -> None:
    """A download given back to the conductor (its peers failed) goes straight from
    ``running`` to ``expected`` (a new generation: its streams end, new requests wait), never
    through ``failed``, which would tell a receiver that looks then that this host has
    nothing."""
    seen: list[str] = []

    class Recording(InFlight):
        def _set(self, download: Download) -> None:
            seen.append(download.state)
            super()._set(download)

    flight = Recording()
    with pytest.raises(LookupError), flight.downloading("img", 10, "/tmp", ".img",
                                                        again=(LookupError,)):
        raise LookupError("its peers failed")
    current = flight.get("img")
    assert seen == [RUNNING, EXPECTED] and current is not None and current.generation == 2


def test_a_download_handed_back_stays_handed_back_until_it_runs_again() -> None:
    """Handed back, its receivers wait longer for it (the image server's ``resume_timeout``);
    another job's announcement does not end that, its next download does."""
    flight = InFlight()
    with pytest.raises(LookupError), flight.downloading(IMG, 10, "/tmp", PREFIX,
                                                        again=(LookupError,)):
        raise LookupError("its peers failed")
    assert flight.get(IMG).handed_back  # type: ignore[union-attr]
    flight.expect(IMG)
    announced = flight.get(IMG)
    assert announced is not None and announced.state == EXPECTED and announced.handed_back
    with flight.downloading(IMG, 10, "/tmp", PREFIX):
        assert not flight.get(IMG).handed_back  # type: ignore[union-attr]
    flight.expect(IMG)
    assert not flight.get(IMG).handed_back  # type: ignore[union-attr]
