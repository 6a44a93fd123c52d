"""Slow and hostile clients against the real API over real sockets: its nginx front, and
``fleetcache-api`` (gunicorn) itself.

Clients reach the stack's API through nginx (``etc/nginx/fleetcache-api.conf``), which reads
whole requests before the API sees them. Without it, 20 connections trickling their headers a
line a second kept a normal ``GET /v2.1`` waiting 28 s: the first two tests hold that attack
for 30 s each against the front. The others go to gunicorn directly, its own line of defence:
before ``[api] client_timeout``, four connections that sent ``Content-Length: 1000`` and 7
bytes held all ``[api] threads`` of the worker until they hung up (75 s seen); a path that is
not UTF-8 got an HTML 500 from gunicorn itself.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from oslo_config import cfg

from fleetcache.common.config import api as api_opts
from tests.integration.conftest import Stack

#: Slack over client_timeout for the cut-off to show (the watchdog, a busy 2-core machine).
MARGIN = 5.0
#: The attack on the front: this many connections, each sending a line a second, this long.
SLOW_CLIENTS = 20
ATTACK_SECONDS = 30
#: How long a normal client's request may wait during the attack.
PROMPT = 1.0


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname == "127.0.0.1" and parts.port  # loopback only
    return parts.hostname, parts.port


@contextlib.contextmanager
def _connections(stack: Stack, count: int, first_bytes: bytes) -> Iterator[list[socket.socket]]:
    """``count`` connections to gunicorn itself (not the front), each sent ``first_bytes``."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.create_connection(_address(stack.api_backend_url), timeout=60)
            sock.sendall(first_bytes)
            socks.append(sock)
        yield socks
    finally:
        for sock in socks:
            sock.close()


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data and data.endswith(b"}"):
                break
    return data


def _limits(stack: Stack) -> tuple[int, float]:
    """``[api] threads`` and ``[api] client_timeout`` of the stack's API."""
    conf = cfg.ConfigOpts()
    api_opts.register_opts(conf)
    conf([], project="fleetcache", default_config_files=[str(stack.conf_file)])
    return int(conf.api.threads), float(conf.api.client_timeout)


def _timed_list(stack: Stack) -> float:
    start = time.monotonic()
    response = stack.api_request("GET", "os-aggregates")
    assert response.status_code == 200, response.text
    return time.monotonic() - start


class Trickler:
    """A connection that sends its request a line at a time, reconnecting when cut off, so
    that it stays one slow client for the whole attack."""

    def __init__(self, address: tuple[str, int], head: bytes, line: bytes) -> None:
        self.address, self.head, self.line = address, head, line
        self.sock: socket.socket | None = None
        self.reconnects = 0

    def step(self) -> None:
        try:
            if self.sock is None:
                self.sock = socket.create_connection(self.address, timeout=5)
                self.sock.sendall(self.head)
            else:
                self.sock.sendall(self.line)
        except OSError:  # the front gave up on it (client_header/body_timeout): come back
            self.close()
            self.reconnects += 1

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _hold_attack(stack: Stack, head: bytes, line: bytes) -> list[float]:
    """Keeps :data:`SLOW_CLIENTS` tricklers on the front for :data:`ATTACK_SECONDS`, and times
    a normal client's ``GET /v2.1`` (a new connection each time) once a second meanwhile."""
    address = _address(stack.api_url)
    tricklers = [Trickler(address, head, line) for _ in range(SLOW_CLIENTS)]
    waits = []
    try:
        for _ in range(ATTACK_SECONDS):  # bounded: one round a second
            started = time.monotonic()
            for trickler in tricklers:
                trickler.step()
            conn = http.client.HTTPConnection(*address, timeout=10)
            try:
                conn.request("GET", "/v2.1")
                response = conn.getresponse()
                response.read()
                waits.append(time.monotonic() - started)
                assert response.status == 200
            finally:
                conn.close()
            time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    finally:
        for trickler in tricklers:
            trickler.close()
    return waits


def test_clients_trickling_headers_do_not_delay_others(stack: Stack) -> None:
    waits = _hold_attack(stack, b"GET /v2.1/os-aggregates HTTP/1.1\r\nHost: api\r\n",
                         b"X-Slow: a line a second\r\n")
    assert len(waits) == ATTACK_SECONDS
    assert max(waits) < PROMPT, f"a normal request waited {max(waits):.2f}s: {waits}"


def test_clients_trickling_a_body_do_not_delay_others(stack: Stack) -> None:
    head = (b"POST /v2.1/os-aggregates HTTP/1.1\r\nHost: api\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
    waits = _hold_attack(stack, head, b'{"aggregate": "a line a second"}\n')
    assert len(waits) == ATTACK_SECONDS
    assert max(waits) < PROMPT, f"a normal request waited {max(waits):.2f}s: {waits}"


def test_slow_bodies_time_out_and_free_every_gunicorn_thread(stack: Stack) -> None:
    threads, client_timeout = _limits(stack)
    head = (b"POST /v2.1/os-aggregates HTTP/1.1\r\nHost: api\r\n"
            b"X-Auth-Token: " + stack.token().encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"aggr")
    start = time.monotonic()
    with _connections(stack, threads + 1, head) as slow:
        time.sleep(0.5)  # every slow client is in a request thread now
        waited = _timed_list(stack)
        assert waited < client_timeout + MARGIN, f"a normal request waited {waited:.1f}s"
        answers = [_read_all(sock) for sock in slow]
    # The last slow client got a thread (and its deadline) only when the first ones were cut.
    assert time.monotonic() - start < 2 * client_timeout + MARGIN
    for answer in answers:
        status_line, _, rest = answer.partition(b"\r\n")
        assert status_line.startswith(b"HTTP/1.1 408"), answer[:200]
        headers, _, body = rest.partition(b"\r\n\r\n")
        assert b"x-compute-request-id: req-" in headers.lower()
        assert json.loads(body)["requestTimeout"]["code"] == 408
    # The threads are free again: the next request is answered at once.
    assert _timed_list(stack) < 2


def test_slow_headers_are_cut_off_by_gunicorn(stack: Stack) -> None:
    threads, client_timeout = _limits(stack)
    with _connections(stack, threads + 1, b"GET /v2.1/os-aggregates HTTP/1.1\r\nHo") as slow:
        time.sleep(0.5)
        waited = _timed_list(stack)
        assert waited < client_timeout + MARGIN, f"a normal request waited {waited:.1f}s"
        for sock in slow:
            assert _read_all(sock) == b""  # closed: no request to answer
    assert _timed_list(stack) < 2


@pytest.mark.parametrize("path", ["/v2.1/os-aggregates/%ff", "/v2.1/os-aggregates/%C2%B3"])
def test_hostile_paths_get_json_faults_through_the_front(stack: Stack, path: str) -> None:
    host, port = _address(stack.api_url)
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: api\r\nX-Auth-Token: {stack.token()}\r\n"
                     "Connection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status_line.split()[1] in (b"400", b"404"), answer[:300]
    assert b"application/json" in headers.lower()
    assert b"x-compute-request-id: req-" in headers.lower()
    fault = json.loads(body)
    assert next(iter(fault.values()))["code"] in (400, 404)
    log = stack.log_file("api").read_text(errors="replace")
    assert path.replace("%ff", "\\xff").replace("%C2%B3", "\u00b3") in log


def test_a_keep_alive_connection_outlives_a_client_s_poll_interval(stack: Stack) -> None:
    """The ``openstack`` client polls every 2 s (``server delete --wait``); gunicorn's default
    keep-alive of 2 s closed the idle connection as the next poll was sent, and the client got
    "Remote end closed connection without response". With ``[api] keepalive`` (75 s) the same
    connection serves a request after 3 s idle."""
    host, port = _address(stack.api_url)
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("GET", "/v2.1")
        first = conn.getresponse()
        first.read()
        assert first.status == 200 and first.getheader("Connection", "").lower() != "close"
        sock = conn.sock
        time.sleep(3)
        conn.request("GET", "/v2.1")  # on the same socket: http.client never reconnects itself
        again = conn.getresponse()
        again.read()
        assert again.status == 200 and conn.sock is sock
    finally:
        conn.close()
