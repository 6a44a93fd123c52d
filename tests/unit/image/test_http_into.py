"""Unit tests of :mod:`fleetcache.image.http_into` (the Glance source's tests cover its use)."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
from collections.abc import Callable, Iterator

import pytest

from fleetcache.image import http_into

TRANSPORT = http_into.Transport(timeout=5.0)


Answered = Callable[[bytes], contextlib.AbstractContextManager[http_into.Body]]


@pytest.fixture
def answered() -> Iterator[Answered]:
    """``answered(raw)``: a GET of a server that answers it with the bytes ``raw``, then
    closes the connection."""
    answer: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(answer[0])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/x"

    def get(raw: bytes) -> contextlib.AbstractContextManager[http_into.Body]:
        answer.append(raw)
        return http_into.get(url, {}, TRANSPORT)

    yield get
    thread.join(5)
    listener.close()


def test_a_body_fills_the_buffers_given_and_ends_at_its_length(answered: Answered) -> None:
    buffer = memoryview(bytearray(8))
    with answered(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789") as body:
        assert (body.status, body.remaining) == (200, 10)
        assert body.readinto(buffer) == 8 and bytes(buffer) == b"01234567"
        assert body.readinto(buffer) == 2 and bytes(buffer[:2]) == b"89"
        assert body.readinto(buffer) == 0


def test_a_body_cut_short_of_its_content_length_is_an_error(answered: Answered) -> None:
    buffer = memoryview(bytearray(64))
    with answered(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789") as body:
        assert body.readinto(buffer) == 10  # what came, before the end
        with pytest.raises(http_into.BodyCut, match="90 bytes short"):
            body.readinto(buffer)


def test_a_chunked_body_cut_short_is_an_error(answered: Answered) -> None:
    with answered(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"a\r\n0123456789\r\n") as body:
        assert body.remaining is None
        with pytest.raises(http.client.IncompleteRead):
            while body.readinto(memoryview(bytearray(64))):
                pass


def test_an_answer_that_is_not_http_is_an_error(answered: Answered) -> None:
    with pytest.raises(http.client.HTTPException):
        with answered(b"SSH-2.0-OpenSSH_9.2\r\n"):
            pass


def test_https_needs_a_context_and_only_http_urls_are_taken() -> None:
    with pytest.raises(ValueError, match="TLS context"):
        with http_into.get("https://127.0.0.1:1/x", {}, TRANSPORT):
            pass
    with pytest.raises(ValueError, match="not an http"):
        with http_into.get("file:///etc/passwd", {}, TRANSPORT):
            pass


def test_tls_context_follows_the_sessions_verify() -> None:
    assert http_into.tls_context(False, None).verify_mode == ssl.CERT_NONE
    strict = http_into.tls_context(True, None)
    assert strict.verify_mode == ssl.CERT_REQUIRED and strict.check_hostname


@pytest.mark.parametrize(("env", "url", "direct"), [
    ({}, "http://glance:9292/v2", True),
    ({"http_proxy": "http://proxy:3128"}, "http://glance:9292/v2", False),
    ({"http_proxy": "http://proxy:3128"}, "https://glance:9292/v2", True),
    ({"https_proxy": "http://proxy:3128"}, "https://glance:9292/v2", False),
    ({"all_proxy": "http://proxy:3128"}, "http://glance:9292/v2", False),
    ({"http_proxy": "http://proxy:3128", "no_proxy": "glance"}, "http://glance:9292/v2", True),
])
def test_reaches_directly_unless_a_proxy_of_the_environment_applies(
        monkeypatch: pytest.MonkeyPatch, env: dict[str, str], url: str, direct: bool) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert http_into.reaches_directly(url) is direct
