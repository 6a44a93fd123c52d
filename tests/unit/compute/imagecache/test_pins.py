"""Unit tests of pins (fleetcache.compute.imagecache.pins) and of the ageing pass honouring
them: a pinned base is never removed before its pin ends, and ages as usual after."""

from __future__ import annotations

import json
import pathlib
import time

from fleetcache.compute.imagecache import ImageCacheManager, cache_name
from fleetcache.compute.imagecache.pins import PinRecord, PinStore
from fleetcache.compute.manager import ComputeManager
from fleetcache.compute.virt.disk import DiskDriver
from fleetcache.image.local import LocalImageSource
from tests.unit.compute.diskfixtures import CTXT, Host, age

MAX_AGE = 30
IMG = "a26887c6-c47b-4654-abb5-dfadf7d3f803"


def _old_cached(host: Host) -> str:
    image = host.add_raw()
    host.cache.fetch(CTXT, image)
    age(host.base(image), MAX_AGE + 10)
    return image


def _manager(host: Host) -> ImageCacheManager:
    host.conf.set_override("remove_unused_original_minimum_age_seconds", MAX_AGE,
                           group="image_cache")
    return ImageCacheManager(host.conf, host.cache)


def test_a_pin_keeps_the_later_time_and_lives_beside_the_index(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    pins = PinStore(host.conf)
    assert pins.pin(IMG, 2000.0)["until"] == 2000.0
    assert pins.pin(IMG, 1000.0)["until"] == 2000.0  # an earlier pin does not shorten it
    assert pins.pin(IMG, 3000.0)["until"] == 3000.0
    record = tmp_path / "instances" / "image_pins" / "_base" / cache_name(IMG)
    assert json.loads(record.read_text()) == {"image_id": IMG, "until": 3000.0}
    assert pins.is_pinned(cache_name(IMG), now=2999) and not pins.is_pinned(
        cache_name(IMG), now=3000)
    lock = host.cache.lock_entry
    assert pins.prune(lock, now=2999) == [] and pins.prune(lock, now=3000) == [cache_name(IMG)]
    assert pins.get(cache_name(IMG)) is None


def test_a_pin_renewed_while_the_pass_prunes_stays(tmp_path: pathlib.Path) -> None:
    """The pass read an expired pin; a pre-cache request renews it before the pass drops it
    (both under the image's lock): the renewed pin stays."""
    host = Host(tmp_path)
    pins = host.cache.pins
    pins.pin(IMG, 1000.0)
    read = pins.pins

    def read_then_renew() -> dict[str, PinRecord]:
        seen = read()
        with host.cache.lock(IMG):
            pins.pin(IMG, 9000.0)
        return seen

    pins.pins = read_then_renew  # type: ignore[method-assign]
    assert pins.prune(host.cache.lock_entry, now=2000) == []
    assert pins.get(cache_name(IMG)) == {"image_id": IMG, "until": 9000.0}


def test_a_bad_or_foreign_record_is_no_pin(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    pins = PinStore(host.conf)
    directory = pathlib.Path(pins.directory)
    directory.mkdir(parents=True)
    (directory / cache_name(IMG)).write_text("{not json")
    (directory / ("0" * 40)).write_text(json.dumps({"image_id": IMG, "until": 9e9}))
    assert pins.get(cache_name(IMG)) is None and pins.get("0" * 40) is None


def test_a_pinned_base_stays_until_its_pin_ends_then_ages_as_usual(
        tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    pinned, unpinned = _old_cached(host), _old_cached(host)
    assert host.cache.pin(pinned, time.time() + 1.0)
    manager = _manager(host)

    result = manager.run_pass()
    assert result.removed == [cache_name(unpinned)]
    assert result.pinned == [cache_name(pinned)] and host.base(pinned).exists()

    time.sleep(1.1)
    assert manager.run_pass().removed == [cache_name(pinned)]
    assert not host.base(pinned).exists()
    assert host.cache.pins.pins() == {}  # the expired pin was dropped


def test_remove_if_older_checks_the_pin_under_the_lock(tmp_path: pathlib.Path) -> None:
    """A pin written after the pass listed the cache (as a pre-cache arriving then) wins."""
    host = Host(tmp_path)
    image = _old_cached(host)
    host.cache.pin(image, time.time() + 60)
    assert host.cache.remove_if_older(cache_name(image), time.time()) is False
    assert host.base(image).exists()


def test_pin_of_an_image_not_cached_pins_nothing(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    assert host.cache.pin(IMG, time.time() + 60) is False
    assert host.cache.pins.pins() == {}


def test_cache_images_with_pin_until_pins_every_cached_image(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path, host="compute-1")
    manager = ComputeManager(host.conf, DiskDriver(host.conf, LocalImageSource(host.conf)))
    new, present = host.add_raw(), host.add_raw()
    manager.cache_images(CTXT, [present])
    until = time.time() + 600
    results = manager.cache_images(CTXT, [new, present], pin_until=until)
    assert [r["state"] for r in results.values()] == ["cached", "existing"]
    assert {r["image_id"]: r["until"] for r in host.cache.pins.pins().values()} == {
        new: until, present: until}
