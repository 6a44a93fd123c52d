"""The fake virt driver: an in-memory image cache, for fast tests and scale benchmarks.

It touches no disk and starts no threads, so one process can hold a thousand of them. Its
knobs are ``[fake_driver]``: ``cache_delay`` stands in for a download, ``fail_images`` makes
chosen images fail, ``unsupported`` makes it behave like a driver without an image cache.
Like the disk driver, two overlapping requests for one image "download" it once, and a
call's end time (``terms.until``) pauses an image not started, or whose delay runs past it
(in memory, nothing is kept: the next call starts it again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import CacheOutcome, DownloadPaused, DownloadTerms
from fleetcache.compute.rpcapi import Peer
from fleetcache.compute.virt.driver import ComputeDriver


class FakeDriver(ComputeDriver):
    """Remembers which images it has "cached"; downloads nothing."""

    capabilities: dict[str, Any] = {
        "has_imagecache": True,
        "supports_image_type_raw": True,
        "supports_image_type_qcow2": True,
    }

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        super().__init__(conf)
        self.cached_images: set[str] = set()
        self._in_flight: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def cache_image(self, ctxt: RequestContext, image_id: str,
                    peers: Sequence[Peer] = (),
                    terms: DownloadTerms | None = None) -> CacheOutcome:
        opts = self.conf.fake_driver
        if opts.unsupported:
            raise NotImplementedError("fake driver configured as unsupported")
        if image_id in opts.fail_images:
            raise exception.ImageFetchError(
                image_id=image_id, reason="listed in [fake_driver] fail_images")
        with self._lock:
            if image_id in self.cached_images:
                return CacheOutcome(downloaded=False)
            waiting_for = self._in_flight.get(image_id)
            if waiting_for is None:
                if terms is not None and terms.expired():
                    raise DownloadPaused(image_id)
                done = self._in_flight[image_id] = threading.Event()
        if waiting_for is not None:  # another request is "downloading" it
            waiting_for.wait()
            return CacheOutcome(downloaded=False)
        try:
            if opts.cache_delay:
                _delay(opts.cache_delay, image_id, terms)
            with self._lock:
                self.cached_images.add(image_id)
        finally:
            with self._lock:
                del self._in_flight[image_id]
            done.set()
        return CacheOutcome(downloaded=True)


def _delay(seconds: float, image_id: str, terms: DownloadTerms | None) -> None:
    """Sleep ``seconds`` ("download"), or until the call's end time and pause."""
    until = terms.until if terms is not None else None
    if until is not None and time.time() + seconds >= until:
        time.sleep(max(until - time.time(), 0.0))
        raise DownloadPaused(image_id)
    time.sleep(seconds)
