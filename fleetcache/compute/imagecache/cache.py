"""The compute's image cache: single-flight fetch, touch on hit, listing, partial downloads, and
the one writer of its index.

Files are laid out as Nova's (:mod:`~fleetcache.compute.imagecache.layout`). Every operation on
one image runs under that image's lock (oslo.concurrency: a thread lock plus an inter-process
file lock), so two requests for an image on one host download it once, whatever process they
come from, and the ageing pass (which takes the same lock and re-checks) never removes an
image that was just reported as present. A download goes to a unique temporary name in the
cache directory and is published only once it passed size and multihash, the download checks
(signatures) and format safety, all fed the same chunks while they are written (one pass over
the bytes), then converted if the disk backend needs it (see
:mod:`~fleetcache.compute.imagecache.download`). Nothing partial is ever visible under the
final name, and any failure (a refused image included) removes the temporary files, so a
refused image never lands in the cache and its reason is the exception's message. With a
direct path (:mod:`~fleetcache.compute.imagecache.direct`), an image with an ``rbd://``
location of this compute's cluster is first exported from Ceph through the same pipeline;
any failure of that attempt leaves nothing and the image is downloaded from the source
instead, the reason kept in the outcome and logged, and counted.

The cache owns its :class:`~fleetcache.compute.imagecache.index.CacheIndex` and is the only
writer of it, always under the image's lock: a published download records its image id and
formats, a hit records the id (an image cached before the index existed gets named), the
base format of an instance disk is read (and, for an unrecorded image, recorded) through
:meth:`ImageCache.base_format`, and records of removed files are dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import stat
import time
from collections.abc import Iterator, Sequence
from typing import Any

from oslo_concurrency import lockutils
from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache.direct import RbdDirect
from fleetcache.compute.imagecache.download import CheckFactory, Published, download_checked
from fleetcache.compute.imagecache.files import fsync_dir, unlink
from fleetcache.compute.imagecache.index import CacheIndex
from fleetcache.compute.imagecache.layout import (
    LOCK_PREFIX,
    PART_MARK,
    cache_dir,
    cache_name,
    is_partial,
    locks_dir,
    partial_prefix,
)
from fleetcache.compute.imagecache.pins import PinStore
from fleetcache.image import ImageMeta, ImageSource, ProgressCallback

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CacheOutcome:
    """What a fetch did: downloaded the image now (``downloaded=True``, with the bytes it
    fetched and the path they took), or found it already cached and touched it
    (``downloaded=False``)."""

    downloaded: bool
    bytes_downloaded: int = 0
    #: ``rbd`` (exported from Ceph) or ``http`` (the image source), for a download.
    download_path: str | None = None
    #: Why the direct path was not taken although the image has an ``rbd://`` location.
    fallback_reason: str | None = None


@dataclasses.dataclass(frozen=True)
class CacheEntry:
    """One file of the cache directory, as the ageing pass and usage reports need it."""

    name: str
    path: str
    size: int
    disk_usage: int
    mtime: float


class ImageCache:
    """The image cache of one compute, filled from ``source``.

    :param checks: the checks every download passes besides size, hashes and format safety
        (signatures), declared once here: they are the cache's policy, not something callers
        add to.
    :param direct: the direct path from Ceph (``[glance] allowed_direct_url_schemes = rbd``),
        tried first for an image with an ``rbd://`` location; None: every image over HTTP.
    :ivar direct_fallbacks: direct downloads that fell back to HTTP since start-up (each is
        also logged with its reason).
    """

    def __init__(self, conf: cfg.ConfigOpts, source: ImageSource,
                 checks: Sequence[CheckFactory] = (), direct: RbdDirect | None = None) -> None:
        self.conf = conf
        self.source = source
        self.direct = direct
        self.direct_fallbacks = 0
        self._checks = tuple(checks)
        self.index = CacheIndex(conf)
        #: Images a pre-cache request pinned (:mod:`~.pins`); written under the image's lock.
        self.pins = PinStore(conf)

    @property
    def checks(self) -> tuple[CheckFactory, ...]:
        return self._checks

    @property
    def base_dir(self) -> str:
        return cache_dir(self.conf)

    @property
    def lock_path(self) -> str:
        return locks_dir(self.conf)

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
        """Remove cache file ``name`` if its mtime is still before ``cutoff`` and it is not
        pinned, under its lock, with its index record.

        The age and the pin are checked again once the lock is held, so an image that a
        request touched, downloaded or pinned meanwhile stays. :returns: whether the file was
        removed.
        """
        path = os.path.join(self.base_dir, name)
        with self.lock_entry(name):
            if self.pins.is_pinned(name):
                return False
            try:
                if os.stat(path).st_mtime >= cutoff:
                    return False
                os.unlink(path)
            except FileNotFoundError:
                return False
            self.index.remove(name)
        LOG.info("Removed cached image file %s (unused since before %s)", path,
                 time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(cutoff)))
        return True

    def pin(self, image_id: str, until: float) -> bool:
        """Pin the cached ``image_id`` until ``until`` (epoch seconds), under its lock.

        :returns: False when the image is not cached (nothing is pinned).
        :raises OSError: the pin could not be written.
        """
        with self.lock(image_id):
            if not os.path.exists(self.path_for(image_id)):
                return False
            self.pins.pin(image_id, until)
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
        """Make sure ``image_id`` is cached and indexed: touch it if present, else download it.

        :returns: ``downloaded=False`` for a hit (including one that another request filled
            while this one waited for the lock), else ``downloaded=True`` and the bytes
            written.
        :raises ImageNotFound, ImageNotAvailable: from the image source, or the image has no
            disk format yet.
        :raises ImageFormatRejected: the bytes failed format inspection.
        :raises ImageSignatureVerificationFailed: from the signature check.
        :raises ImageFetchError: the download or its verification failed, the file could not
            be written or converted. In every case nothing is left behind.
        """
        self.ensure_dirs()
        with self.lock(image_id):
            if self._hit(image_id):
                return CacheOutcome(downloaded=False)
            meta = self.source.show(ctxt, image_id)
            if meta.id == image_id:
                return self._fill(ctxt, meta, progress)
        # The image service spells the id otherwise (an upper-case id asked of a Glance on a
        # case-insensitive database): the base, its lock and its index entry go by the
        # service's spelling, so that every spelling finds the one base.
        with self.lock(meta.id):
            if self._hit(meta.id):
                return CacheOutcome(downloaded=False)
            return self._fill(ctxt, meta, progress)

    def _hit(self, image_id: str) -> bool:
        """Touch and index ``image_id`` if it is cached; the caller holds its lock."""
        if not self.touch(image_id):
            return False
        self._record(image_id)
        return True

    def _fill(self, ctxt: RequestContext, meta: ImageMeta,
              progress: ProgressCallback | None) -> CacheOutcome:
        """Download ``meta`` into the cache and index it; the caller holds its lock."""
        self._remove_partials(meta.id)
        started = time.monotonic()
        published, path, fallback = self._download(ctxt, meta, progress)
        fsync_dir(self.base_dir)
        self._record(meta.id, published.disk_format, published.base_format)
        written = published.bytes_downloaded
        elapsed = time.monotonic() - started
        LOG.info("Cached image %s (%d bytes, %s) in %.2f s (%.1f MB/s)", meta.id, written,
                 path, elapsed, written / max(elapsed, 1e-6) / 1e6)
        return CacheOutcome(downloaded=True, bytes_downloaded=written, download_path=path,
                            fallback_reason=fallback)

    def _download(self, ctxt: RequestContext, meta: ImageMeta,
                  progress: ProgressCallback | None) -> tuple[Published, str, str | None]:
        """One checked download (we hold the image's lock): from Ceph when the direct path
        applies, else, or when it fails in any way (nothing of it is left), over HTTP.

        :returns: what was published, the path (``rbd`` or ``http``), the fallback reason.
        """
        final, prefix = self.path_for(meta.id), partial_prefix(meta.id)
        route = self.direct.route(meta) if self.direct is not None else None
        fallback = route.fallback if route is not None else None
        if route is not None and route.location is not None:
            assert self.direct is not None
            rbd = self.direct.source(route.location, self.base_dir, prefix)
            try:
                published = download_checked(self.conf, rbd, ctxt, meta, self._checks, final,
                                             prefix, progress)
            except Exception as exc:
                fallback = f"{type(exc).__name__}: {exc}"
            else:
                return published, "rbd", None
        if fallback is not None:
            self.direct_fallbacks += 1
            LOG.warning("Image %s: direct download from Ceph not used, downloading over HTTP "
                        "(fallback %d on this host): %s", meta.id, self.direct_fallbacks,
                        fallback)
        try:
            published = download_checked(self.conf, self.source, ctxt, meta, self._checks,
                                         final, prefix, progress)
        except exception.FleetcacheException as exc:
            if fallback is None:
                raise
            raise both_failed(exc, fallback) from exc
        return published, "http", fallback

    def base_format(self, image_id: str, disk_format: str, planned: str) -> str:
        """The format the cached base of ``image_id`` is stored in; the caller holds the
        image's lock and the base exists.

        It is what the index recorded when the base was downloaded; for a base with no
        recorded format (cached before the index existed) it is ``planned``, the format this
        configuration's plan stores, which is then recorded with ``disk_format``.

        :raises OSError: the record could not be written.
        """
        known = self.index.get(cache_name(image_id))
        base_format = known["base_format"] if known and known["base_format"] else planned
        self.index.record(image_id, disk_format, base_format)
        return base_format

    def prune_index(self) -> list[str]:
        """Remove the index records whose cache file is gone. :returns: their names.

        Each is checked and removed under its image's lock (skipped while someone holds it),
        so a record written by a fetch that has just finished is never lost.
        """
        removed = []
        for name in self.index.names():
            try:
                with self.lock_entry(name, blocking=False):
                    if os.path.exists(os.path.join(self.base_dir, name)):
                        continue
                    self.index.remove(name)
            except lockutils.AcquireLockFailedException:
                continue
            removed.append(name)
        return removed

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
        prefix = partial_prefix(image_id) if image_id else "."
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
                    unlink(path)
            except lockutils.AcquireLockFailedException:
                continue
            LOG.warning("Removed partial download %s left by an earlier process", path)
            removed.append(path)
        return removed

    def disk_usage(self) -> int:
        """Bytes of disk the complete cached files take."""
        return sum(e.disk_usage for e in self.list_entries())

    def _scan(self) -> list[os.DirEntry[str]]:
        """Regular files, and the FIFOs of direct downloads (hidden partial names only)."""
        try:
            with os.scandir(self.base_dir) as it:
                return [e for e in it if e.is_file(follow_symlinks=False)
                        or (is_partial(e.name) and _is_fifo(e))]
        except FileNotFoundError:
            return []

    def _remove_partials(self, image_id: str) -> None:
        """Remove what a crashed download of ``image_id`` left (we hold its lock)."""
        for path in self.partial_files(image_id):
            LOG.warning("Removing partial download %s left by an earlier attempt", path)
            unlink(path)

    def _record(self, image_id: str, disk_format: str | None = None,
                base_format: str | None = None) -> None:
        """Index the cached ``image_id`` (we hold its lock). A record that cannot be written
        is logged, not raised: the image is cached all the same, and a missing record only
        keeps it out of the reports until a later hit writes it."""
        try:
            self.index.record(image_id, disk_format, base_format)
        except OSError:
            LOG.exception("Could not index cached image %s", image_id)


def _is_fifo(entry: os.DirEntry[str]) -> bool:
    try:
        return stat.S_ISFIFO(entry.stat(follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def both_failed(http_error: exception.FleetcacheException,
                fallback: str) -> exception.FleetcacheException:
    """The HTTP download's error after a direct download that fell back, naming both causes.

    Its type and keyword arguments are the HTTP error's (an image that Glance does not know is
    still ``ImageNotFound``), its message ``http: <that error>; rbd fallback because:
    <why the direct path failed>``, so that an operator reading the job's reason sees the
    first failure too.
    """
    return type(http_error)(f"http: {http_error}; rbd fallback because: {fallback}",
                            **http_error.kwargs)
