"""The compute's image cache: naming, single-flight fetch, touch on hit, listing.

Layout, as Nova's::

    <instances_path>/<[image_cache] subdirectory_name>/<sha1(image_id)>   a cached image
    <instances_path>/<[image_cache] subdirectory_name>/.<sha1>.part-XXXX  a download under way
    <instances_path>/locks/fleetcache-<sha1>                               its lock file

Every operation on one image runs under that image's lock (oslo.concurrency: a thread lock
plus an inter-process file lock), so two requests for an image on one host download it once,
whatever process they come from, and the ageing pass (which takes the same lock and re-checks)
never removes an image that was just reported as present. A download goes to a unique
temporary name in the cache directory and published only once it passed size and multihash,
the :class:`DownloadCheck` s (signatures) and format safety, all fed the same chunks while
they are written (one pass over the bytes), then converted if the disk backend needs it (see
:mod:`fleetcache.compute._download`). Nothing partial is ever visible under the final name, and
any failure (a refused image included) removes the temporary files, so a refused image never
lands in the cache and its reason is the exception's message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

from oslo_concurrency import lockutils
from oslo_config import cfg

from fleetcache.common.context import RequestContext
from fleetcache.compute import _cachefiles
from fleetcache.compute._download import CheckFactory, DownloadCheck, download_checked, publish
from fleetcache.compute.virt.driver import CacheOutcome
from fleetcache.image import ImageMeta, ImageSource, ProgressCallback

LOG = logging.getLogger(__name__)

LOCK_PREFIX = "fleetcache-"
PART_MARK = ".part-"


__all__ = ["LOCK_PREFIX", "PART_MARK", "CacheEntry", "CheckFactory", "DownloadCheck",
           "ImageCache", "cache_name", "is_partial", "publish"]


@dataclasses.dataclass(frozen=True)
class CacheEntry:
    """One file of the cache directory, as the ageing pass and usage reports need it."""

    name: str
    path: str
    size: int
    disk_usage: int
    mtime: float


def cache_name(image_id: str) -> str:
    """File name of ``image_id`` in the cache: the hex sha1 of the id (as Nova)."""
    return hashlib.sha1(image_id.encode("utf-8"), usedforsecurity=False).hexdigest()


def is_partial(name: str) -> bool:
    """Whether a cache directory entry is a download under way (or left by a crash)."""
    return name.startswith(".") and PART_MARK in name


class ImageCache:
    """The image cache of one compute, filled from ``source``."""

    def __init__(self, conf: cfg.ConfigOpts, source: ImageSource,
                 checks: Sequence[CheckFactory] = ()) -> None:
        self.conf = conf
        self.source = source
        self.checks = list(checks)

    @property
    def base_dir(self) -> str:
        instances_path: str = self.conf.instances_path
        return os.path.join(instances_path, self.conf.image_cache.subdirectory_name)

    @property
    def lock_path(self) -> str:
        instances_path: str = self.conf.instances_path
        return os.path.join(instances_path, "locks")

    def path_for(self, image_id: str) -> str:
        return os.path.join(self.base_dir, cache_name(image_id))

    def ensure_dirs(self) -> None:
        os.makedirs(self.base_dir, exist_ok=True)
        os.makedirs(self.lock_path, exist_ok=True)

    @contextlib.contextmanager
    def lock(self, image_id: str, blocking: bool = True) -> Iterator[None]:
        """Hold ``image_id``'s lock, against threads and other processes of this host.

        :raises AcquireLockFailedException: when not ``blocking`` and someone holds it.
        """
        with self.lock_entry(cache_name(image_id), blocking):
            yield

    def lock_entry(self, name: str,
                   blocking: bool = True) -> contextlib.AbstractContextManager[Any]:
        """The lock of cache file ``name`` (the ageing pass knows names, not image ids)."""
        return lockutils.lock(name, lock_file_prefix=LOCK_PREFIX, external=True,
                              lock_path=self.lock_path, blocking=blocking)

    def remove_if_older(self, name: str, cutoff: float) -> bool:
        """Remove cache file ``name`` if its mtime is still before ``cutoff``, under its lock.

        The age is checked again once the lock is held, so an image that a request touched
        (or downloaded) meanwhile stays. :returns: whether the file was removed.
        """
        path = os.path.join(self.base_dir, name)
        with self.lock_entry(name):
            try:
                if os.stat(path).st_mtime >= cutoff:
                    return False
                os.unlink(path)
            except FileNotFoundError:
                return False
        LOG.info("Removed cached image file %s (unused since before %s)", path,
                 time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(cutoff)))
        return True

    def touch(self, image_id: str) -> bool:
        """Renew the image's lease (mtime); False when it is not cached.

        :raises OSError: other than a missing file (e.g. EACCES), so that it is reported.
        """
        try:
            os.utime(self.path_for(image_id))
        except FileNotFoundError:
            return False
        return True

    def fetch(self, ctxt: RequestContext, image_id: str,
              progress: ProgressCallback | None = None) -> CacheOutcome:
        """Make sure ``image_id`` is cached: touch it if present, else download it.

        :returns: ``cached=False`` for a hit (including one that another request filled
            while this one waited for the lock), else ``cached=True`` and the bytes written.
        :raises ImageNotFound, ImageNotAvailable: from the image source.
        :raises ImageFormatRejected: the bytes failed format inspection.
        :raises ImageSignatureVerificationFailed: from the signature check.
        :raises ImageFetchError: the download or its verification failed, the file could not
            be written or converted. In every case nothing is left behind.
        """
        self.ensure_dirs()
        with self.lock(image_id):
            if self.touch(image_id):
                return CacheOutcome(cached=False)
            self._remove_partials(image_id)
            started = time.monotonic()
            meta = self.source.show(ctxt, image_id)
            written = self._download(ctxt, meta, progress)
        elapsed = time.monotonic() - started
        LOG.info("Cached image %s (%d bytes) in %.2f s (%.1f MB/s)", image_id, written,
                 elapsed, written / max(elapsed, 1e-6) / 1e6)
        return CacheOutcome(cached=True, bytes_downloaded=written)

    def list_entries(self) -> list[CacheEntry]:
        """The cache's complete files (downloads under way are left out), sorted by name."""
        entries = []
        for entry in self._scan():
            if entry.name.startswith("."):
                continue
            with contextlib.suppress(FileNotFoundError):
                st = entry.stat()
                entries.append(CacheEntry(entry.name, entry.path, st.st_size,
                                          st.st_blocks * 512, st.st_mtime))
        return sorted(entries, key=lambda e: e.name)

    def partial_files(self, image_id: str | None = None) -> list[str]:
        """Paths of downloads under way or left by a crash (of ``image_id`` only, if given)."""
        prefix = f".{cache_name(image_id)}{PART_MARK}" if image_id else "."
        return sorted(e.path for e in self._scan()
                      if e.name.startswith(prefix) and is_partial(e.name))

    def remove_stale_partials(self) -> list[str]:
        """Remove downloads left by a process that died (their image's lock is free).

        Downloads under way (lock held) are left alone. :returns: the paths removed.
        """
        removed = []
        for path in self.partial_files():
            name = os.path.basename(path)[1:].partition(PART_MARK)[0]
            try:
                with self.lock_entry(name, blocking=False):
                    _cachefiles.unlink(path)
            except lockutils.AcquireLockFailedException:
                continue
            LOG.warning("Removed partial download %s left by an earlier process", path)
            removed.append(path)
        return removed

    def disk_usage(self) -> int:
        """Bytes of disk the complete cached files take."""
        return sum(e.disk_usage for e in self.list_entries())

    def _scan(self) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(self.base_dir) as it:
                return [e for e in it if e.is_file(follow_symlinks=False)]
        except FileNotFoundError:
            return []

    def _remove_partials(self, image_id: str) -> None:
        """Remove what a crashed download of ``image_id`` left (we hold its lock)."""
        for path in self.partial_files(image_id):
            LOG.warning("Removing partial download %s left by an earlier attempt", path)
            _cachefiles.unlink(path)

    def _download(self, ctxt: RequestContext, meta: ImageMeta,
                  progress: ProgressCallback | None) -> int:
        """Download ``meta`` to a temporary file, check it in the same pass, publish it."""
        written = download_checked(
            self.conf, self.source, ctxt, meta, self.checks, self.path_for(meta.id),
            f".{cache_name(meta.id)}{PART_MARK}", progress)
        _cachefiles.fsync_dir(self.base_dir)
        return written
