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
any failure of that attempt but the host's own (out of memory, a file it cannot write or
convert, its disk floor) leaves nothing and the image is downloaded from the source
instead, the reason kept in the outcome and logged, and counted.

A call's terms (:mod:`~fleetcache.compute.imagecache.terms`: an end time and a rate) apply to
its downloads; one stopped at the end time keeps its bytes as the image's paused download
(:mod:`~fleetcache.compute.imagecache.paused`), which the next fetch resumes over HTTP after
re-reading it through the checks. A paused download is hidden like a download under way:
never listed, reported, indexed or served; :meth:`ImageCache.remove_old_paused` (the ageing
pass) drops those older than ``[image_cache] partial_keep_seconds``, and a fetch drops its
image's when the image service no longer knows the image.

With peers (:mod:`fleetcache.compute.peers`, a pre-cache job's sources), an image with a
multihash is first fetched from them through the same pipeline; metadata still comes from the
image source only. Peers that fail in transport hand over to the next peer, then to the
origin (see :meth:`ImageCache.fetch`); bytes that fail verification are dropped and the image
is fetched again from the origin from byte 0, the peers that sent them named in the outcome.
:meth:`ImageCache.servable` says which cached bases hold an image's own bytes, the only ones
the image server may send to peers.

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
from fleetcache.compute.imagecache.download import CheckFactory
from fleetcache.compute.imagecache.download_paths import DownloadPaths, PeersGone
from fleetcache.compute.imagecache.files import fsync_dir, unlink
from fleetcache.compute.imagecache.index import CacheIndex
from fleetcache.compute.imagecache.layout import (
    PART_MARK,
    cache_dir,
    cache_name,
    is_partial,
    locks_dir,
    partial_prefix,
    paused_cache_name,
    paused_name,
)
from fleetcache.compute.imagecache.locks import named_lock
from fleetcache.compute.imagecache.pins import PinStore
from fleetcache.compute.imagecache.terms import DownloadPaused, DownloadTerms
from fleetcache.compute.peers.inflight import InFlight
from fleetcache.compute.rpcapi import Peer
from fleetcache.image import ImageMeta, ImageSource, ProgressCallback
from fleetcache.image.verify import HashCpus

LOG = logging.getLogger(__name__)

@dataclasses.dataclass(frozen=True)
class CacheOutcome:
    """What a fetch did: downloaded the image now (``downloaded=True``, with the bytes it
    fetched and the path they took), or found it already cached and touched it
    (``downloaded=False``)."""

    downloaded: bool
    bytes_downloaded: int = 0
    #: ``rbd`` (exported from Ceph), ``http`` (the image source) or ``peer`` (the published
    #: bytes all came from peers), for a download.
    download_path: str | None = None
    #: Why the direct path was not taken although the image has an ``rbd://`` location.
    fallback_reason: str | None = None
    #: The peer that sent the last peer bytes (None: no peer sent any).
    source_host: str | None = None
    #: Bytes fetched from peers and from the origin (Ceph or the image service), wasted
    #: ones included (bytes that failed verification, a peer that failed mid-transfer).
    bytes_from_peers: int = 0
    bytes_from_origin: int = 0
    #: Why peers were given but not (only) used: ``no_multihash``, ``peer_failed: <host>:
    #: <why>`` (the last peer that failed; ``peer_absent`` when every peer given only lacked
    #: the image), ``hash_mismatch: <hosts>``.
    peer_fallback: str | None = None
    #: Peers whose bytes failed verification (size, hash, signature or format).
    bad_peers: tuple[str, ...] = ()
    #: Peers that answered that they do not hold the image (a 404 that says so).
    absent_peers: tuple[str, ...] = ()
    #: Bytes taken from the image's paused download (re-read and checked, not fetched).
    bytes_resumed: int = 0


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
        self._checks = tuple(checks)
        #: The paths a download takes (peers, Ceph, the source) and their fallbacks; its
        #: downloads hash on CPUs of their own (one per process: this cache's).
        self.paths = DownloadPaths(conf, self._checks, direct, HashCpus())
        self.index = CacheIndex(conf)
        #: Images a pre-cache request pinned (:mod:`~.pins`); written under the image's lock.
        self.pins = PinStore(conf)
        #: Downloads under way, which the image server may stream (cut-through).
        self.in_flight = InFlight()

    @property
    def direct_fallbacks(self) -> int:
        return self.paths.direct_fallbacks

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

    def paused_file(self, image_id: str) -> str:
        """Where the paused download of ``image_id`` is kept (if it has one)."""
        return os.path.join(self.base_dir, paused_name(image_id))

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
        return named_lock(self.lock_path, name, blocking)

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

    def servable(self, image_id: str) -> str | None:
        """The path of the cached base of ``image_id`` if it holds the image's own bytes, the
        only ones a peer may be sent (its index record says ``base_format == disk_format``);
        None when it is not cached, not indexed, or converted (qcow2 -> raw is not the
        image's bytes: a peer would refuse its hash). The caller opens it without following
        links (the file may go at any time)."""
        name = cache_name(image_id)
        record = self.index.get(name)
        if (record is None or record["image_id"] != image_id or not record["disk_format"]
                or record["base_format"] != record["disk_format"]):
            return None
        path = os.path.join(self.base_dir, name)
        return path if os.path.lexists(path) else None

    def fetch(self, ctxt: RequestContext, image_id: str,
              progress: ProgressCallback | None = None,
              peers: Sequence[Peer] = (), terms: DownloadTerms | None = None) -> CacheOutcome:
        """Make sure ``image_id`` is cached and indexed: touch it if present, else download it
        (resuming its paused download, if it has one, over HTTP).

        :param peers: hosts that hold the image, tried in order before the origin, only when
            the image service gives the image a multihash (``os_hash_algo`` of
            :data:`~fleetcache.image.verify.STRONG_HASHES`); their bytes pass the same
            checks as the origin's. Peers that fail in transport hand over to the next;
            after the last, the origin resumes at the bytes written when it can (the image
            service's ``Range``), else the download starts again from the origin at byte 0
            (the direct path, then HTTP).
            Bytes refused by a check (hash, signature, format), whoever sent them, are
            dropped and the image is fetched again from the origin from byte 0.
        :param terms: the call's end time and rate (:mod:`~.terms`); None: neither.
        :returns: ``downloaded=False`` for a hit (including one that another request filled
            while this one waited for the lock), else ``downloaded=True`` and the bytes
            written, the path they took and, with peers, where they came from.
        :raises ImageNotFound, ImageNotAvailable: from the image source, or the image has no
            disk format yet.
        :raises ImageFormatRejected: the bytes failed format inspection.
        :raises ImageSignatureVerificationFailed: from the signature check.
        :raises ImageFetchError: the download or its verification failed, the file could not
            be written or converted. In every case nothing is left behind.
        :raises DownloadPaused: the call's end time came before the image was complete: what
            was received is kept as its paused download (none if it had not started).
        """
        self.ensure_dirs()
        with self.lock(image_id):
            if self._hit(image_id):
                return CacheOutcome(downloaded=False)
            meta = self._show(ctxt, image_id)
            if meta.id == image_id:
                return self._fill(ctxt, meta, progress, peers, terms)
        # The image service spells the id otherwise (an upper-case id asked of a Glance on a
        # case-insensitive database): the base, its lock and its index entry go by the
        # service's spelling, so that every spelling finds the one base.
        with self.lock(meta.id):
            if self._hit(meta.id):
                return CacheOutcome(downloaded=False)
            return self._fill(ctxt, meta, progress, peers, terms)

    def _show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        """The image's metadata; an image the service no longer knows loses its paused
        download (we hold its lock)."""
        try:
            return self.source.show(ctxt, image_id)
        except exception.ImageNotFound:
            unlink(self.paused_file(image_id))
            raise

    def _hit(self, image_id: str) -> bool:
        """Touch and index ``image_id`` if it is cached; the caller holds its lock."""
        if not self.touch(image_id):
            return False
        self._record(image_id)
        return True

    def _fill(self, ctxt: RequestContext, meta: ImageMeta,
              progress: ProgressCallback | None, peers: Sequence[Peer],
              terms: DownloadTerms | None) -> CacheOutcome:
        """:meth:`_download`, registered as under way for the image server (cut-through).

        A download whose peers all failed and whose call leaves the next source to the
        conductor (:class:`PeersGone`) is announced again as coming: the conductor calls
        again (once it has a download slot, if it gives it the image service), and until
        then, for up to ``peer_wait_timeout``, the image server asks this host's own
        receivers to wait (``not_yet``) instead of telling them it has nothing (they would
        each go back to the conductor too).
        """
        with self.in_flight.downloading(meta.id, meta.size, self.base_dir,
                                        partial_prefix(meta.id), again=(PeersGone,)):
            return self._download(ctxt, meta, progress, peers, terms)

    def _download(self, ctxt: RequestContext, meta: ImageMeta,
                  progress: ProgressCallback | None, peers: Sequence[Peer],
                  terms: DownloadTerms | None) -> CacheOutcome:
        """Download ``meta`` into the cache and index it; the caller holds its lock."""
        self._remove_partials(meta.id)
        started = time.monotonic()
        try:
            got = self.paths.download(ctxt, self.source, meta, self.path_for(meta.id),
                                      partial_prefix(meta.id), progress, peers, terms,
                                      self.paused_file(meta.id))
        except DownloadPaused as paused:
            LOG.info("Image %s: %s (%d bytes fetched, %d resumed, in %.2f s)", meta.id,
                     paused.reason, paused.bytes_downloaded, paused.bytes_resumed,
                     time.monotonic() - started)
            raise
        fsync_dir(self.base_dir)
        published = got.published
        self._record(meta.id, published.disk_format, published.base_format)
        written = published.bytes_downloaded
        elapsed = time.monotonic() - started
        LOG.info("Cached image %s (%d bytes, %s%s) in %.2f s (%.1f MB/s)", meta.id, written,
                 got.path, f" from {got.source_host}" if got.path == "peer" else "", elapsed,
                 written / max(elapsed, 1e-6) / 1e6)
        return CacheOutcome(downloaded=True, bytes_downloaded=written, download_path=got.path,
                            fallback_reason=got.fallback, source_host=got.source_host,
                            bytes_from_peers=got.bytes_from_peers,
                            bytes_from_origin=got.bytes_from_origin,
                            peer_fallback=got.peer_fallback, bad_peers=got.bad_peers,
                            absent_peers=got.absent_peers, bytes_resumed=got.bytes_resumed)

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

    def paused_files(self) -> list[str]:
        """Paths of the paused downloads, sorted."""
        return sorted(e.path for e in self._scan() if paused_cache_name(e.name))

    def remove_old_paused(self, cutoff: float) -> list[str]:
        """Remove the paused downloads last written before ``cutoff`` (epoch seconds), each
        under its image's lock, re-checked once taken (one whose lock is held, being resumed
        or written, is skipped). :returns: the paths removed."""
        removed = []
        for path in self.paused_files():
            name = paused_cache_name(os.path.basename(path))
            assert name is not None
            try:
                with self.lock_entry(name, blocking=False):
                    if os.stat(path, follow_symlinks=False).st_mtime >= cutoff:
                        continue
                    os.unlink(path)
            except (lockutils.AcquireLockFailedException, FileNotFoundError):
                continue
            LOG.info("Removed paused download %s (written before %s)", path,
                     time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(cutoff)))
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

