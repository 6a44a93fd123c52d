"""The image cache manager: the periodic ageing pass over the cache, and the cache report.

A pass (Nova's ``ImageCacheManager.update``), every ``[image_cache] manager_interval``:

1. the cutoff is taken first: ``now - remove_unused_original_minimum_age_seconds``;
2. the cache's complete files are listed (downloads under way are hidden temporary files,
   never entries) and the instance disks are scanned for the bases they use
   (:mod:`fleetcache.compute.disk_users`);
3. each file no disk uses, not pinned (:mod:`~fleetcache.compute.imagecache.pins`) and
   last touched (mtime) before the cutoff is removed, with its index record, by
   :meth:`ImageCache.remove_if_older`, which takes the image's lock and re-checks the age and
   the pin: a download holds that lock, and a fetch, a pin or a new disk writes under it, so
   none loses its image; pins that have expired are dropped first, and their files then age
   as usual;
4. paused downloads (:mod:`~fleetcache.compute.imagecache.paused`) last written before
   ``now - partial_keep_seconds`` are removed (:meth:`ImageCache.remove_old_paused`, under
   the image's lock, skipped while a request holds it), whatever
   ``remove_unused_base_images`` says: they are no image of the cache;
5. the bytes freed are logged, index records whose file is gone pruned
   (:meth:`ImageCache.prune_index`), and the cache's contents reported through the injected
   report function (the compute service sends them to the conductor).

Pre-caching an image touches it, which renews its lease by the same minimum age.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import NotRequired, TypedDict

from oslo_config import cfg
from oslo_log import log as logging

from fleetcache.compute import disk_users
from fleetcache.compute.imagecache.cache import ImageCache

LOG = logging.getLogger(__name__)

#: ``manager_interval = 0`` means this default periodic rate (as Nova).
DEFAULT_INTERVAL = 60.0


class CachedImage(TypedDict):
    """One image of a cache report: its size in bytes and its last use (epoch seconds)."""

    image_id: str
    size: int
    last_used: float
    #: Until when a pre-cache request pinned it (epoch seconds); absent: not pinned.
    pinned_until: NotRequired[float]


#: Sends a report: ``(images, usage_bytes)``.
ReportFunc = Callable[[list[CachedImage], int], None]


@dataclasses.dataclass(frozen=True)
class PassResult:
    """What one ageing pass did; names are cache file names."""

    removed: list[str]
    freed_bytes: int
    in_use: list[str]
    kept: list[str]
    unknown_disks: list[str]
    #: Kept because a pre-cache request pinned them (a subset of ``kept``).
    pinned: list[str] = dataclasses.field(default_factory=list)
    #: Paused downloads removed (paths).
    removed_paused: list[str] = dataclasses.field(default_factory=list)


def manager_interval(conf: cfg.ConfigOpts) -> float | None:
    """Seconds between passes from ``[image_cache] manager_interval``; ``None``: disabled."""
    interval = int(conf.image_cache.manager_interval)
    if interval < 0:
        return None
    return float(interval) if interval else DEFAULT_INTERVAL


class ImageCacheManager:
    """Ages out unused base images of one cache and reports what the cache holds.

    :param report: called with the cache's images and disk usage after each pass; its errors
        are logged, never raised. ``None`` reports nothing.
    """

    def __init__(self, conf: cfg.ConfigOpts, cache: ImageCache,
                 report: ReportFunc | None = None) -> None:
        self.conf = conf
        self.cache = cache
        self._report = report

    def run_pass(self) -> PassResult:
        """One ageing pass (see the module docstring), then a report."""
        opts = self.conf.image_cache
        now = time.time()
        cutoff = now - opts.remove_unused_original_minimum_age_seconds
        self.cache.pins.prune(self.cache.lock_entry, now)
        pins = self.cache.pins.pins()
        entries = self.cache.list_entries()
        users = disk_users.scan(self.conf, self.cache.base_dir)
        removed, kept, pinned, freed = [], [], [], 0
        may_remove = opts.remove_unused_base_images and not users.unknown
        for entry in entries:
            if entry.name in users.bases:
                continue
            if entry.name in pins:
                pinned.append(entry.name)
                kept.append(entry.name)
            elif may_remove and entry.mtime < cutoff and self.cache.remove_if_older(
                    entry.name, cutoff):
                removed.append(entry.name)
                freed += entry.disk_usage
            else:
                kept.append(entry.name)
        removed_paused = self.cache.remove_old_paused(now - opts.partial_keep_seconds)
        self.cache.prune_index()
        result = PassResult(removed, freed, sorted(users.bases.keys() & {e.name for e in entries}),
                            kept, users.unknown, pinned, removed_paused)
        self._log(result, len(entries))
        self.report()
        return result

    def cached_images(self) -> tuple[list[CachedImage], int]:
        """The cache's images the index can name, each with its pin while it holds, and the
        disk bytes of every cached file."""
        images, usage = [], 0
        now = time.time()
        pins = self.cache.pins.pins()
        for entry in self.cache.list_entries():
            usage += entry.disk_usage
            record = self.cache.index.get(entry.name)
            if record is None:
                LOG.debug("Cached file %s has no index record; not reported", entry.path)
                continue
            image = CachedImage(image_id=record["image_id"], size=entry.size,
                                last_used=entry.mtime)
            pin = pins.get(entry.name)
            if pin is not None and pin["until"] > now:
                image["pinned_until"] = pin["until"]
            images.append(image)
        return images, usage

    def report(self) -> None:
        """Send the cache's contents through ``report``; never raises."""
        if self._report is None:
            return
        try:
            images, usage = self.cached_images()
            self._report(images, usage)
        except Exception as exc:
            LOG.warning("Reporting the image cache failed (%s: %s); the next report replaces "
                        "it", type(exc).__name__, exc)

    def _log(self, result: PassResult, count: int) -> None:
        if result.unknown_disks:
            LOG.warning("Image cache pass removed nothing: the base images of %s are unknown",
                        ", ".join(result.unknown_disks))
        if result.removed:
            LOG.info("Image cache pass removed %d unused base image(s) (%s), freeing %d bytes",
                     len(result.removed), ", ".join(result.removed), result.freed_bytes)
        LOG.debug("Image cache pass: %d cached, %d in use, %d kept, %d removed", count,
                  len(result.in_use), len(result.kept), len(result.removed))
