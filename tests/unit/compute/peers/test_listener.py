"""The peer image server's listener (fleetcache.compute.peers.listener) with a handler that
records what it is given: request heads read at the door, workers only for whole requests.
The real server behind it is tested in tests/functional/compute/test_peers*.py."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator

import pytest

from fleetcache.compute.peers import listener as listener_module
from fleetcache.compute.peers.http_wire import MAX_HEAD
from fleetcache.compute.peers.listener import BoundedListener
from tests.waiting import wait_for

HEAD = b"GET /v1/images/x HTTP/1.1\r\nHost: peer\r\n\r\n"


class Recorder:
    """A handler that keeps each request's head and answers ``OK``, or ``BUSY`` when no
    worker is free; ``hold`` keeps its workers until set."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self.overloaded_count = 0
        self.hold = threading.Event()
        self.hold.set()

    def wrap(self, sock: socket.socket) -> socket.socket:
        return sock

    def refused_handshake(self, remote: str, exc: ssl.SSLError) -> None:
        raise AssertionError("no TLS here")

    def overloaded(self, sock: socket.socket) -> None:
        self.overloaded_count += 1
        sock.sendall(b"BUSY")

    def serve_connection(self, sock: socket.socket, remote: str, head: bytes) -> None:
        self.heads.append(head)
        self.hold.wait(10)
        sock.sendall(b"OK")


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def port(recorder: Recorder) -> Iterator[int]:
    server = BoundedListener(("127.0.0.1", 0), recorder, workers=2, header_timeout=0.5)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        server.abort_all()
        server.pool.shutdown(wait=True)
        thread.join()


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _answer(sock: socket.socket) -> bytes:
    answer = b""
    while chunk := sock.recv(1024):
        answer += chunk
    return answer


def test_idle_connections_wait_at_the_door_and_a_whole_request_is_served(
        port: int, recorder: Recorder) -> None:
    idle = [_connect(port) for _ in range(20)]  # ten times the workers
    try:
        with _connect(port) as sock:
            sock.sendall(HEAD)
            assert _answer(sock) == b"OK"
        assert recorder.heads == [HEAD] and recorder.overloaded_count == 0
    finally:
        for sock in idle:
            sock.close()


def test_a_head_sent_in_pieces_is_handed_over_whole(port: int, recorder: Recorder) -> None:
    with _connect(port) as sock:
        for i in range(0, len(HEAD), 7):
            sock.sendall(HEAD[i:i + 7])
            time.sleep(0.01)
        assert _answer(sock) == b"OK"
    assert recorder.heads == [HEAD]


def test_a_head_larger_than_the_limit_is_handed_over_at_the_limit(
        port: int, recorder: Recorder) -> None:
    with _connect(port) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nA: " + b"x" * (4 * MAX_HEAD))
        assert _answer(sock) == b"OK"
    (head,) = recorder.heads
    assert MAX_HEAD < len(head) <= MAX_HEAD + 4096 and b"\r\n\r\n" not in head


def test_a_connection_without_a_whole_head_is_closed_at_the_deadline(
        port: int, recorder: Recorder) -> None:
    with _connect(port) as sock:
        started = time.monotonic()
        sock.sendall(HEAD[:10])
        assert _answer(sock) == b""
        assert 0.4 < time.monotonic() - started < 2
    assert recorder.heads == []


def test_a_whole_request_beyond_every_worker_is_refused_at_once(
        port: int, recorder: Recorder) -> None:
    recorder.hold.clear()
    busy = [_connect(port) for _ in range(2)]
    try:
        for sock in busy:
            sock.sendall(HEAD)
        wait_for(lambda: len(recorder.heads) == 2, "both workers busy", 5)
        with _connect(port) as sock:
            sock.sendall(HEAD)
            assert _answer(sock) == b"BUSY"
        recorder.hold.set()
        assert [_answer(sock) for sock in busy] == [b"OK", b"OK"]
    finally:
        for sock in busy:
            sock.close()


def test_one_connection_more_than_the_door_holds_closes_the_oldest(
        port: int, recorder: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listener_module, "MAX_AT_DOOR", 3)
    idle = [_connect(port) for _ in range(3)]
    try:
        time.sleep(0.1)  # all three at the door
        with _connect(port) as sock:
            sock.sendall(HEAD)
            assert _answer(sock) == b"OK"
        assert _answer(idle[0]) == b""  # the oldest, closed unanswered
        idle[1].sendall(HEAD)
        assert _answer(idle[1]) == b"OK"
    finally:
        for sock in idle:
            sock.close()
