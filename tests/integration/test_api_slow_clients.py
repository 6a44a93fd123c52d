"""Slow and hostile clients against the real ``fleetcache-api`` (gunicorn) over real sockets.

Before ``[api] client_timeout``, four connections that sent ``Content-Length: 1000`` and 7
bytes held all ``[api] threads`` of the worker until they hung up, and every other request
waited (75 s seen); a path that is not UTF-8 got an HTML 500 from gunicorn itself.
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


def _address(stack: Stack) -> tuple[str, int]:
    url = urlsplit(stack.api_url)
    assert url.hostname and url.port
    return url.hostname, url.port


@contextlib.contextmanager
def _connections(stack: Stack, count: int, first_bytes: bytes) -> Iterator[list[socket.socket]]:
    socks = []
    try:
        for _ in range(count):
            sock = socket.create_connection(_address(stack), timeout=60)
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


def test_slow_bodies_time_out_and_free_every_thread(stack: Stack) -> None:
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


def test_slow_headers_are_cut_off(stack: Stack) -> None:
    threads, client_timeout = _limits(stack)
    with _connections(stack, threads + 1, b"GET /v2.1/os-aggregates HTTP/1.1\r\nHo") as slow:
        time.sleep(0.5)
        waited = _timed_list(stack)
        assert waited < client_timeout + MARGIN, f"a normal request waited {waited:.1f}s"
        for sock in slow:
            assert _read_all(sock) == b""  # closed: no request to answer
    assert _timed_list(stack) < 2


@pytest.mark.parametrize("path", ["/v2.1/os-aggregates/%ff", "/v2.1/os-aggregates/%C2%B3"])
def test_hostile_paths_get_json_faults_from_gunicorn(stack: Stack, path: str) -> None:
    host, port = _address(stack)
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
    host, port = _address(stack)
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
