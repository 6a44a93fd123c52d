"""Unit tests of the fake virt driver (fleetcache.compute.virt.fake)."""

from __future__ import annotations

import concurrent.futures
import threading
import time
import tracemalloc

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import CacheOutcome, DownloadPaused, DownloadTerms
from fleetcache.compute.virt.fake import FakeDriver
from tests.unit.image.fixtures import make_conf

CTXT = RequestContext()


def test_caches_in_memory_then_reports_existing() -> None:
    driver = FakeDriver(make_conf())
    assert driver.cache_image(CTXT, "img") == CacheOutcome(downloaded=True)
    assert driver.cache_image(CTXT, "img") == CacheOutcome(downloaded=False)
    assert driver.cached_images == {"img"}


def test_fail_images_raise_a_fetch_error() -> None:
    driver = FakeDriver(make_conf(fake_driver__fail_images=["bad"]))
    with pytest.raises(exception.ImageFetchError, match="fail_images"):
        driver.cache_image(CTXT, "bad")
    assert driver.cache_image(CTXT, "good").downloaded


def test_unsupported_raises_not_implemented() -> None:
    with pytest.raises(NotImplementedError):
        FakeDriver(make_conf(fake_driver__unsupported=True)).cache_image(CTXT, "img")


def test_cache_delay_stands_in_for_a_download() -> None:
    driver = FakeDriver(make_conf(fake_driver__cache_delay=0.2))
    started = time.monotonic()
    driver.cache_image(CTXT, "img")
    assert time.monotonic() - started >= 0.2
    started = time.monotonic()
    driver.cache_image(CTXT, "img")
    assert time.monotonic() - started < 0.1


def test_an_end_time_pauses_a_delay_that_runs_past_it_and_an_image_not_started() -> None:
    driver = FakeDriver(make_conf(fake_driver__cache_delay=5.0))
    started = time.monotonic()
    with pytest.raises(DownloadPaused):
        driver.cache_image(CTXT, "img", terms=DownloadTerms(until=time.time() + 0.1))
    assert 0.05 < time.monotonic() - started < 1
    with pytest.raises(DownloadPaused):
        driver.cache_image(CTXT, "img", terms=DownloadTerms(until=time.time() - 1))
    assert driver.cached_images == set()  # nothing kept in memory: the next call starts over
    driver.conf.set_override("cache_delay", 0, group="fake_driver")
    assert driver.cache_image(CTXT, "img", terms=DownloadTerms(until=time.time() + 60))


def test_overlapping_requests_wait_for_the_first() -> None:
    driver = FakeDriver(make_conf(fake_driver__cache_delay=0.2))
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        outcomes = list(pool.map(lambda _: driver.cache_image(CTXT, "img"), range(3)))
    assert sorted(o.downloaded for o in outcomes) == [False, False, True]


def test_a_thousand_drivers_are_cheap() -> None:
    conf = make_conf()
    threads_before = threading.active_count()
    tracemalloc.start()
    drivers = [FakeDriver(conf) for _ in range(1000)]
    for driver in drivers:
        driver.cache_image(CTXT, "img")
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert threading.active_count() == threads_before
    assert size < 2 * 1024 * 1024
