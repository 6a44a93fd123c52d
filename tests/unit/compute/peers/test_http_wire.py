"""The peer image server's range parsing (fleetcache.compute.peers.http_wire.parse_range); the
server itself is tested on a real socket in tests/functional/compute/test_peers.py."""

from __future__ import annotations

import pytest

from fleetcache.compute.peers.http_wire import RangeNotSatisfiable, parse_range


def test_no_range_is_the_whole_file() -> None:
    assert parse_range(None, 100) is None


@pytest.mark.parametrize(("value", "span"), [
    ("bytes=0-", (0, 99)), ("bytes=10-", (10, 99)), ("bytes=10-19", (10, 19)),
    ("bytes=99-99", (99, 99)), ("bytes=90-1000", (90, 99)), (" bytes=5-6 ", (5, 6)),
])
def test_one_range_from_a_first_byte(value: str, span: tuple[int, int]) -> None:
    assert parse_range(value, 100) == span


@pytest.mark.parametrize("value", [
    "bytes=0-1,5-6", "bytes=-10", "bytes=100-", "bytes=20-10", "items=0-1", "bytes=a-b",
    "bytes=", "bytes 0-1", "bytes=0-1 , 2-3",
])
def test_several_suffix_foreign_or_unsatisfiable_ranges_are_refused(value: str) -> None:
    with pytest.raises(RangeNotSatisfiable):
        parse_range(value, 100)


def test_an_empty_file_satisfies_no_range() -> None:
    with pytest.raises(RangeNotSatisfiable):
        parse_range("bytes=0-", 0)
