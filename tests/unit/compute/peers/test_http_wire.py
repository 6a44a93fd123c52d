"""The peer image server's HTTP (fleetcache.compute.peers.http_wire): range parsing, the
request head, and the response head on a socket pair; the server itself is tested on a real
socket in tests/functional/compute/test_peers.py, its listener in test_listener.py."""

from __future__ import annotations

import socket

import pytest

from fleetcache.compute.peers import http_wire


def test_no_range_is_the_whole_file() -> None:
    assert http_wire.parse_range(None, 100) is None


@pytest.mark.parametrize(("value", "span"), [
    ("bytes=0-", (0, 99)), ("bytes=10-", (10, 99)), ("bytes=10-19", (10, 19)),
    ("bytes=99-99", (99, 99)), ("bytes=90-1000", (90, 99)), (" bytes=5-6 ", (5, 6)),
])
def test_one_range_from_a_first_byte(value: str, span: tuple[int, int]) -> None:
    assert http_wire.parse_range(value, 100) == span


@pytest.mark.parametrize("value", [
    "bytes=0-1,5-6", "bytes=-10", "bytes=100-", "bytes=20-10", "items=0-1", "bytes=a-b",
    "bytes=", "bytes 0-1", "bytes=0-1 , 2-3",
    "bytes=" + "9" * 5000 + "-", "bytes=0-" + "9" * 5000, "bytes=\u0661-\u0662",
])
def test_several_suffix_foreign_or_unsatisfiable_ranges_are_refused(value: str) -> None:
    with pytest.raises(http_wire.RangeNotSatisfiable):
        http_wire.parse_range(value, 100)


def test_an_empty_file_satisfies_no_range() -> None:
    with pytest.raises(http_wire.RangeNotSatisfiable):
        http_wire.parse_range("bytes=0-", 0)


def test_a_whole_head_is_parsed_with_lower_case_header_names() -> None:
    head = b"GET /v1/images/x HTTP/1.1\r\nAuthorization: a b\r\nRange:  bytes=0-\r\n\r\n"
    assert http_wire.head_ended(head) and not http_wire.head_ended(head[:-1])
    method, target, headers = http_wire.parse_head(head)
    assert (method, target) == ("GET", "/v1/images/x")
    assert headers == {"authorization": "a b", "range": "bytes=0-"}


@pytest.mark.parametrize(("head", "status"), [
    (b"GET /v1/images/x\r\n\r\n", 400), (b"GET / SPDY/3\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nno colon\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nA: 1\r\na: 2\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nA: " + b"x" * (http_wire.MAX_HEAD + 1), 431),
    (b"GET / HTTP/1.1\r\nA: 1\r\n", 400),
])
def test_a_bad_large_or_cut_head_is_refused(head: bytes, status: int) -> None:
    with pytest.raises(http_wire.Refused) as info:
        http_wire.parse_head(head)
    assert info.value.status == status


def test_a_response_head_without_a_length_says_none(
        pair: tuple[socket.socket, socket.socket]) -> None:
    client, server = pair
    http_wire.send_head(server, 503, {"Retry-After": "5"})
    assert client.recv(4096) == (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/octet-stream\r\n"
        b"Connection: close\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n")
