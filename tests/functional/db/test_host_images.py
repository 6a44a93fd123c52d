"""The image cache reports of computes (fleetcache.common.db.host_images) on every backend."""

from __future__ import annotations

import datetime
import threading

import pytest

from fleetcache.common import exception
from fleetcache.common.db import host_images
from fleetcache.common.db.host_images import ReportedImage
from fleetcache.common.db.session import Database
from tests.stored_reports import hosts_with_image, stored_image_ids, stored_report

pytestmark = pytest.mark.db

T0 = 1_800_000_000.25


def _image(image_id: str, size: int = 1024, last_used: float = T0) -> ReportedImage:
    return ReportedImage(image_id=image_id, size=size, last_used=last_used)


def test_a_report_is_stored_and_read_back(db: Database) -> None:
    assert host_images.set_host_images(
        db, "h1", [_image("a", 5 * 2**40), _image("b")], 7 * 2**30, reported_at=T0) is True
    cache = stored_report(db, "h1")
    assert cache is not None
    assert (cache["usage_bytes"], cache["image_count"]) == (7 * 2**30, 2)
    assert cache["reported_at"] == host_images.from_epoch(T0)
    assert [(i["image_id"], i["size"]) for i in cache["images"]] == [("a", 5 * 2**40),
                                                                      ("b", 1024)]
    assert cache["images"][0]["last_used"] == datetime.datetime(2027, 1, 15, 8, 0, 0, 250000)


def test_a_report_replaces_the_hosts_set_only(db: Database) -> None:
    host_images.set_host_images(db, "h1", [_image("a"), _image("b")], 10, reported_at=T0)
    host_images.set_host_images(db, "h2", [_image("a")], 10, reported_at=T0)
    host_images.set_host_images(db, "h1", [_image("c")], 20, reported_at=T0 + 1)
    assert stored_image_ids(db, "h1") == ["c"]
    assert hosts_with_image(db, "a") == ["h2"]
    host_images.set_host_images(db, "h1", [], 0, reported_at=T0 + 2)
    cache = stored_report(db, "h1")
    assert cache is not None and cache["images"] == [] and cache["image_count"] == 0


def test_an_older_report_is_dropped(db: Database) -> None:
    host_images.set_host_images(db, "h1", [_image("new")], 10, reported_at=T0 + 5)
    assert host_images.set_host_images(db, "h1", [_image("old")], 10, reported_at=T0) is False
    assert stored_image_ids(db, "h1") == ["new"]


@pytest.mark.parametrize("bad", [
    {"image_id": "", "size": 1, "last_used": T0},
    {"image_id": "x" * 256, "size": 1, "last_used": T0},
    {"image_id": "a", "size": -1, "last_used": T0},
    {"image_id": "a", "size": 1},
    "a",
])
def test_malformed_reports_are_refused(db: Database, bad: object) -> None:
    with pytest.raises(exception.InvalidInput):
        host_images.set_host_images(db, "h1", [bad], 10)  # type: ignore[list-item]


def test_concurrent_first_reports_of_one_host(db: Database) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def report(n: int) -> None:
        try:
            start.wait()
            host_images.set_host_images(db, "h1", [_image(f"img{n}"), _image("shared")], n,
                                        reported_at=T0 + n)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=report, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    cache = stored_report(db, "h1")
    assert cache is not None and cache["usage_bytes"] == 3  # the newest report won
    assert [i["image_id"] for i in cache["images"]] == ["img3", "shared"]


def test_concurrent_later_reports_of_one_host_newest_wins(db: Database) -> None:
    """The host's row exists: racing reports must still leave the newest one (SQLite ignores
    FOR UPDATE, so the age check needs the write lock taken first)."""
    host_images.set_host_images(db, "h1", [_image("first")], 0, reported_at=T0)
    for rnd in range(5):
        errors: list[BaseException] = []
        start = threading.Barrier(6)

        def report(n: int, rnd: int = rnd, start: threading.Barrier = start,
                   errors: list[BaseException] = errors) -> None:
            try:
                start.wait()
                host_images.set_host_images(db, "h1", [_image(f"r{rnd}n{n}")], n,
                                            reported_at=T0 + 10 * rnd + n + 1)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=report, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        assert stored_image_ids(db, "h1") == [f"r{rnd}n5"], f"round {rnd}"


def test_pins_are_stored_read_back_and_replaced_by_the_next_report(db: Database) -> None:
    pinned = ReportedImage(image_id="a", size=1, last_used=T0, pinned_until=T0 + 3600.5)
    assert host_images.set_host_images(db, "h1", [pinned, _image("b")], 10, reported_at=T0)
    by_id = {i["image_id"]: i for i in host_images.host_cache_get(db, "h1")[1]}
    assert by_id["a"]["pinned_until"] == datetime.datetime(2027, 1, 15, 9, 0, 0, 750000)
    assert by_id["b"]["pinned_until"] is None
    host_images.set_host_images(db, "h1", [_image("a"), _image("b")], 10, reported_at=T0 + 1)
    assert [i["pinned_until"] for i in host_images.host_cache_get(db, "h1")[1]] == [None, None]


def test_a_malformed_pin_is_refused(db: Database) -> None:
    bad = {"image_id": "a", "size": 1, "last_used": T0, "pinned_until": "tomorrow"}
    with pytest.raises(exception.InvalidInput, match="tomorrow"):
        host_images.set_host_images(db, "h1", [bad], 10)  # type: ignore[list-item]
