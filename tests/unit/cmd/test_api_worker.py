"""The read deadlines of ``fleetcache-api``'s worker, on real socket pairs."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from fleetcache.cmd.api_worker import ReadDeadlines


@pytest.fixture
def deadlines() -> ReadDeadlines:
    watchdog = ReadDeadlines()
    watchdog.start()
    return watchdog


def _blocked_read(sock: socket.socket) -> tuple[list[bytes], threading.Thread]:
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(sock.recv(100)))
    reader.start()
    return got, reader


def test_a_blocked_read_ends_at_the_deadline(
    deadlines: ReadDeadlines, pair: tuple[socket.socket, socket.socket]
) -> None:
    server, client = pair
    client.sendall(b"7 bytes")
    assert server.recv(100) == b"7 bytes"
    start = time.monotonic()
    deadlines.arm(server, 0.3)
    got, reader = _blocked_read(server)
    reader.join(timeout=5)
    assert got == [b""]  # end of file: the server stops waiting for the rest
    assert 0.25 <= time.monotonic() - start < 2
    server.sendall(b"answer")  # the writing side still works
    assert client.recv(100) == b"answer"


def test_a_disarmed_deadline_cuts_nothing(
    deadlines: ReadDeadlines, pair: tuple[socket.socket, socket.socket]
) -> None:
    server, client = pair
    deadlines.disarm(deadlines.arm(server, 0.1))
    got, reader = _blocked_read(server)
    time.sleep(0.4)
    client.sendall(b"late but welcome")
    reader.join(timeout=5)
    assert got == [b"late but welcome"]


def test_a_later_arm_with_an_earlier_deadline_wakes_the_watchdog(
    deadlines: ReadDeadlines, pair: tuple[socket.socket, socket.socket]
) -> None:
    server, client = pair
    other_server, other_client = socket.socketpair()
    try:
        deadlines.arm(other_server, 60)
        start = time.monotonic()
        deadlines.arm(server, 0.2)
        got, reader = _blocked_read(server)
        reader.join(timeout=5)
        assert got == [b""] and time.monotonic() - start < 2
    finally:
        other_server.close()
        other_client.close()


def test_a_closed_socket_is_skipped(deadlines: ReadDeadlines) -> None:
    server, client = socket.socketpair()
    deadlines.arm(server, 0.0)
    server.close()
    client.close()
    deadlines.expire(time.monotonic() + 1)  # no error for the closed socket


def test_stale_entries_are_dropped(pair: tuple[socket.socket, socket.socket]) -> None:
    watchdog = ReadDeadlines()  # not started: expire() is driven by hand
    for _ in range(200):
        watchdog.disarm(watchdog.arm(pair[0], 60))
    watchdog.expire(time.monotonic())
    assert len(watchdog._heap) == 0

