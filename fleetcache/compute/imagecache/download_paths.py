"""The paths an image's bytes take into the cache (``peer``, ``rbd``, ``http``) and the
fallbacks between them; every path feeds the same checked download
(:func:`~fleetcache.compute.imagecache.download.download_checked`).

* **peers** (a pre-cache job's sources, :mod:`fleetcache.compute.peers`), only for an image
  with a multihash (:data:`~fleetcache.image.verify.STRONG_HASHES`): peers that fail in
  transport hand over to the next; after the last, the origin resumes at the bytes written
  when it can (the image service's ``Range``), else the image comes from the origin from
  byte 0; or, when the call's terms leave that to the conductor, :class:`PeersGone` is
  raised, the bytes kept as the image's paused download. Bytes refused by a check
  (hash, signature, format), whoever sent them, are dropped and the image is fetched again
  from the origin from byte 0, the peers that sent them named; or, when the call's terms
  leave that to the conductor, :class:`PeerBytesRefused` is raised (nothing kept);
* **rbd**: the direct path from Ceph (:mod:`~fleetcache.compute.imagecache.direct`) for an
  image with an ``rbd://`` location of this compute's cluster; any failure leaves nothing
  and falls back to HTTP, the reason kept, but this host's own (:data:`HOST_FAILURES`);
* **http**: the image source; a paused download of the image
  (:mod:`~fleetcache.compute.imagecache.paused`) is resumed there: its bytes re-read through
  the checks, the rest asked of the source from its end (``Range``). Bytes of a resumed
  download refused by a check are dropped with the paused file and the image is fetched
  again from byte 0 in the same call. The other paths start from byte 0 and drop the
  paused download.

A call's terms (:mod:`~fleetcache.compute.imagecache.terms`) apply to every path: each
download's source is bound to them, and a download stopped at the call's end time is kept as
the image's paused download (whatever its path) and raised as
:class:`~fleetcache.compute.imagecache.terms.DownloadPaused`, with what this call fetched and
resumed and, after peers, those that lacked the image.

This host's own failures (:data:`HOST_FAILURES`: out of memory, a file it cannot write or
convert, its disk floor) end the call on any path: another source of the same bytes would
meet them too, so no fallback is made and no peer is named.

Metadata always comes from the image source (the caller's ``meta``), never from a peer.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Sequence

from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache.direct import RbdDirect
from fleetcache.compute.imagecache.download import CheckFactory, Published, download_checked
from fleetcache.compute.imagecache.files import unlink
from fleetcache.compute.imagecache.paused import NotResumable, ResumedSource, kept_bytes
from fleetcache.compute.imagecache.terms import DownloadPaused, DownloadTerms, MiB
from fleetcache.compute.peers.source import FallbackKind, PeersFailed, PeerSource
from fleetcache.compute.rpcapi import Peer
from fleetcache.image import ImageMeta, ImageSource, ProgressCallback
from fleetcache.image.verify import HashCpus, has_strong_hash

LOG = logging.getLogger(__name__)

#: Errors that mean the bytes themselves were refused (not the transfer).
REFUSED_BYTES: tuple[type[Exception], ...] = (
    exception.ImageChecksumMismatch, exception.ImageSignatureVerificationFailed,
    exception.ImageFormatRejected)
#: This host's own failures: the same whatever the bytes' source, so neither another source
#: nor the origin is tried for them (peers are not blamed, no fallback is counted).
HOST_FAILURES: tuple[type[Exception], ...] = (
    exception.HostOutOfMemory, exception.ImageStoreFailed, exception.DiskFloorReached)
#: Errors after which a paused download is dropped and the image fetched from byte 0.
_RESUME_FAILED: tuple[type[Exception], ...] = (*REFUSED_BYTES, NotResumable)


class PeerBytesRefused(exception.ImageFetchError):
    """Bytes from peers failed a check and the call's terms leave the next source to the
    conductor (``origin_after_refused_peers`` False): nothing of them is kept.

    :ivar bad_peers: the peers whose bytes were written, in order.
    :ivar bytes_from_peers: the bytes they sent (wasted), and ``bytes_from_origin``: those
        the origin sent after them (an origin resume), wasted too.
    :ivar absent_peers: the peers asked before them that only answered that they do not
        hold the image, so that the conductor names none of them as the next source.
    """

    msg_fmt = "Image %(image_id)s: bytes from peers %(peers)s refused: %(reason)s"

    def __init__(self, image_id: str, bad_peers: tuple[str, ...], reason: str,
                 bytes_from_peers: int, bytes_from_origin: int,
                 absent_peers: tuple[str, ...] = ()) -> None:
        super().__init__(image_id=image_id, peers=", ".join(bad_peers), reason=reason)
        self.bad_peers = bad_peers
        self.bytes_from_peers = bytes_from_peers
        self.bytes_from_origin = bytes_from_origin
        self.absent_peers = absent_peers


class PeersGone(DownloadPaused):
    """Every peer failed or lacked the image, and the call's terms leave the next source to
    the conductor (``origin_after_failed_peers`` False, RPC 1.7): the bytes written are kept
    as the image's paused download, which a next call from the image service resumes (one
    from peers starts again from byte 0).

    :ivar failure: ``<host>: <why>`` of the last peer that failed.
    :ivar failed_peers: the peers that failed in transport, in order (not those that only
        asked to be asked again).
    :ivar absent_peers: the peers that only answered that they do not hold the image.
    :ivar kind: ``peer_failed``, or ``peer_absent`` when every peer only lacked the image
        (:attr:`~fleetcache.compute.peers.source.PeerSource.fallback_kind`).
    :ivar source_host: the last peer whose bytes were written (None: none).
    """

    def __init__(self, image_id: str, failure: str, failed_peers: tuple[str, ...] = (),
                 absent_peers: tuple[str, ...] = (),
                 kind: FallbackKind = "peer_failed") -> None:
        super().__init__(image_id, absent_peers=absent_peers)
        self.failure = failure
        self.failed_peers = failed_peers
        self.kind = kind
        self.source_host: str | None = None

    @property
    def fallback(self) -> str:
        """The result's ``fallback_reason`` (``peer_failed: compute0: cannot connect: ...``):
        :attr:`reason` without the bytes kept, which only the call's outcome says."""
        return f"{self.kind}: {self.failure}"

    @property
    def reason(self) -> str:
        """``peer_failed: compute0: cannot connect: ...; 16.0 MiB kept ...``."""
        return (f"{self.fallback}; {self.kept / MiB:.1f} MiB kept for the next source the "
                "conductor names")


@dataclasses.dataclass(frozen=True)
class Fetched:
    """One download's publication and where its bytes came from (the fields of
    :class:`~fleetcache.compute.imagecache.cache.CacheOutcome`)."""

    published: Published
    path: str
    fallback: str | None = None
    source_host: str | None = None
    bytes_from_peers: int = 0
    bytes_from_origin: int = 0
    peer_fallback: str | None = None
    bad_peers: tuple[str, ...] = ()
    #: Peers that answered that they do not hold the image (a 404 that says so).
    absent_peers: tuple[str, ...] = ()
    #: Bytes taken from the image's paused download (not fetched by this call).
    bytes_resumed: int = 0


@dataclasses.dataclass(frozen=True)
class _Download:
    """One image's download: where it goes and on what terms (the fields every path
    passes on)."""

    meta: ImageMeta
    final: str
    prefix: str
    progress: ProgressCallback | None
    terms: DownloadTerms
    #: The image's paused download (kept there when this one pauses).
    paused: str | None


class DownloadPaths:
    """Downloads one image into ``final`` by the first path that works.

    :param checks: the cache's checks (signatures), run on every path.
    :param direct: the direct path from Ceph; None: no ``rbd`` path.
    :param hash_cpus: the process's CPUs for hashing, shared by its downloads.
    :ivar direct_fallbacks: direct downloads that fell back to HTTP since start-up.
    """

    def __init__(self, conf: cfg.ConfigOpts, checks: Sequence[CheckFactory],
                 direct: RbdDirect | None, hash_cpus: HashCpus | None = None) -> None:
        self.conf = conf
        self.checks = tuple(checks)
        self.direct = direct
        self.hash_cpus = hash_cpus
        self.direct_fallbacks = 0

    def download(self, ctxt: RequestContext, source: ImageSource, meta: ImageMeta,
                 final: str, prefix: str, progress: ProgressCallback | None,
                 peers: Sequence[Peer] = (), terms: DownloadTerms | None = None,
                 paused: str | None = None) -> Fetched:
        """Download ``meta`` (as ``source`` describes it) to ``final`` through a temporary
        ``<prefix>XXXX`` beside it (the caller holds the image's lock).

        :param terms: the call's end time and rate; None: neither.
        :param paused: the image's paused download: resumed over HTTP, dropped by the other
            paths, and where this download keeps its bytes if it pauses; None: no pausing.
        :raises DownloadPaused: the call's end time came first (before the download started:
            nothing kept but what was there).
        :raises: as :meth:`~fleetcache.compute.imagecache.cache.ImageCache.fetch`; nothing
            else is left behind.
        """
        job = _Download(meta, final, prefix, progress, terms or DownloadTerms(), paused)
        if job.terms.expired():
            raise DownloadPaused(meta.id, kept=kept_bytes(paused) if paused else 0,
                                 size=meta.size)
        if peers and peer_hash(meta):
            return self._from_peers(ctxt, source, job, peers)
        got = self._from_origin(ctxt, source, job)
        return dataclasses.replace(got, peer_fallback="no_multihash") if peers else got

    def _checked(self, ctxt: RequestContext, source: ImageSource, job: _Download,
                 resume: str | None = None) -> tuple[Published, int]:
        """One checked download from ``source`` under the job's terms (``resume``: first the
        bytes of that paused download), kept if it pauses.

        :returns: its publication, and the bytes taken from ``resume``.
        """
        bound = job.terms.bind(source)
        reader = ResumedSource(resume, bound) if resume is not None else None
        try:
            published = download_checked(self.conf, reader or bound, ctxt, job.meta,
                                         self.checks, job.final, job.prefix, job.progress,
                                         job.paused, self.hash_cpus)
        except DownloadPaused as exc:
            exc.bytes_resumed = reader.resumed if reader is not None else 0
            exc.bytes_downloaded = max(exc.kept - exc.bytes_resumed, 0)
            raise
        return published, reader.resumed if reader is not None else 0

    def _drop_paused(self, job: _Download) -> None:
        if job.paused is not None and kept_bytes(job.paused):
            LOG.info("Image %s: dropping its paused download (this path starts from byte 0)",
                     job.meta.id)
            unlink(job.paused)

    def _from_peers(self, ctxt: RequestContext, origin: ImageSource, job: _Download,
                    peers: Sequence[Peer]) -> Fetched:
        """One checked download from ``peers`` (then the origin resuming); on any failure
        but :data:`HOST_FAILURES`, the origin from byte 0."""
        meta = job.meta
        self._drop_paused(job)
        gone = (None if job.terms.origin_after_failed_peers
                else functools.partial(_peers_gone, meta.id))
        source = PeerSource(self.conf, peers, origin=origin, until=job.terms.until,
                            at_end=functools.partial(_pause_at_end, meta.id),
                            at_peers_gone=gone)
        try:
            return self._through_peers(ctxt, origin, job, source)
        except DownloadPaused as exc:  # waiting for peers, or the origin's download after them
            exc.absent_peers = source.absent_hosts
            raise

    def _through_peers(self, ctxt: RequestContext, origin: ImageSource, job: _Download,
                       source: PeerSource) -> Fetched:
        """:meth:`_from_peers` once its source is built."""
        meta = job.meta
        try:
            published, _ = self._checked(ctxt, source, job)
        except PeersGone as exc:
            exc.source_host = source.last_peer
            LOG.warning("Image %s: %s", meta.id, exc.reason)
            raise
        except DownloadPaused:
            raise
        except REFUSED_BYTES as exc:
            bad = source.contributors
            if not bad:
                raise  # refused before any peer byte: the image itself, not a peer
            if not job.terms.origin_after_refused_peers:
                LOG.warning("Image %s: bytes from peers %s refused (%s); the conductor "
                            "names the next source", meta.id, ", ".join(bad), exc)
                raise PeerBytesRefused(meta.id, bad, str(exc), source.bytes_from_peers,
                                       source.bytes_from_origin, source.absent_hosts) from exc
            why = f"hash_mismatch: {','.join(bad)}"
            LOG.warning("Image %s: bytes from peers %s refused (%s); fetching it from the "
                        "origin", meta.id, ", ".join(bad), exc)
            return self._after_peers(ctxt, origin, job, source, why, bad)
        except HOST_FAILURES:
            raise  # neither the peers' failure nor one the origin would escape
        except Exception as exc:  # any other failure: the origin is the way out
            why = (f"{source.fallback_kind}: {exc.kwargs.get('reason')}"
                   if isinstance(exc, PeersFailed)
                   else f"peer_failed: {source.failure()}: {type(exc).__name__}: {exc}")
            LOG.warning("Image %s: %s; fetching it from the origin", meta.id, why)
            return self._after_peers(ctxt, origin, job, source, why, ())
        from_origin = source.bytes_from_origin
        return Fetched(published, "http" if from_origin else "peer",
                       source_host=source.last_peer, bytes_from_peers=source.bytes_from_peers,
                       bytes_from_origin=from_origin,
                       peer_fallback=(f"{source.fallback_kind}: {source.failure()}"
                                      if from_origin else None),
                       absent_peers=source.absent_hosts)

    def _after_peers(self, ctxt: RequestContext, origin: ImageSource, job: _Download,
                     source: PeerSource, why: str, bad: tuple[str, ...]) -> Fetched:
        """The origin download from byte 0 after peers failed, counting the peers' bytes."""
        self._drop_paused(job)  # a peer download that failed may not be resumed
        got = self._from_origin(ctxt, origin, job)
        return dataclasses.replace(
            got, source_host=source.last_peer, bytes_from_peers=source.bytes_from_peers,
            bytes_from_origin=got.bytes_from_origin + source.bytes_from_origin,
            peer_fallback=why, bad_peers=bad, absent_peers=source.absent_hosts)

    def _from_origin(self, ctxt: RequestContext, source: ImageSource,
                     job: _Download) -> Fetched:
        """One checked download from Ceph when the direct path applies, else, or when it
        fails in any way but :data:`HOST_FAILURES` (nothing of it is left), over HTTP."""
        meta = job.meta
        route = self.direct.route(meta) if self.direct is not None else None
        fallback = route.fallback if route is not None else None
        if route is not None and route.location is not None:
            assert self.direct is not None
            self._drop_paused(job)
            rbd = self.direct.source(route.location, os.path.dirname(job.final), job.prefix)
            try:
                published, _ = self._checked(ctxt, rbd, job)
            except DownloadPaused:
                raise
            except HOST_FAILURES:
                raise
            except Exception as exc:
                fallback = f"{type(exc).__name__}: {exc}"
                self._drop_paused(job)
            else:
                return Fetched(published, "rbd", bytes_from_origin=published.bytes_downloaded)
        if fallback is not None:
            self.direct_fallbacks += 1
            LOG.warning("Image %s: direct download from Ceph not used, downloading over HTTP "
                        "(fallback %d on this host): %s", meta.id, self.direct_fallbacks,
                        fallback)
        try:
            return self._http(ctxt, source, job, fallback)
        except DownloadPaused:
            raise
        except exception.FleetcacheException as exc:
            if fallback is None:
                raise
            raise both_failed(exc, fallback) from exc

    def _http(self, ctxt: RequestContext, source: ImageSource, job: _Download,
              fallback: str | None) -> Fetched:
        """The HTTP download, resuming the image's paused download when there is one."""
        resume = self._resumable(job)
        if resume is not None:
            try:
                published, resumed = self._checked(ctxt, source, job, resume)
            except _RESUME_FAILED as exc:
                LOG.warning("Image %s: resuming its paused download failed (%s); dropping it "
                            "and downloading the image from byte 0", job.meta.id, exc)
                self._drop_paused(job)
            else:
                unlink(resume)
                fetched = published.bytes_downloaded - resumed
                return Fetched(dataclasses.replace(published, bytes_downloaded=fetched),
                               "http", fallback, bytes_from_origin=fetched,
                               bytes_resumed=resumed)
        published, _ = self._checked(ctxt, source, job)
        return Fetched(published, "http", fallback, bytes_from_origin=published.bytes_downloaded)

    def _resumable(self, job: _Download) -> str | None:
        """The image's paused download to resume, if it has one that fits the image (one
        larger than the image is dropped)."""
        if job.paused is None:
            return None
        kept = kept_bytes(job.paused)
        if not kept:
            return None
        size = job.meta.size
        if size is not None and kept > size:
            LOG.warning("Image %s: its paused download holds %d bytes, the image %d; dropping "
                        "it", job.meta.id, kept, size)
            unlink(job.paused)
            return None
        LOG.info("Image %s: resuming its paused download at byte %d", job.meta.id, kept)
        return job.paused


def _pause_at_end(image_id: str) -> None:
    """The call's end time came while a download waited for its peers."""
    raise DownloadPaused(image_id)


def _peers_gone(image_id: str, source: PeerSource) -> None:
    """No peer is left; the conductor names the next source (RPC 1.7)."""
    raise PeersGone(image_id, source.failure(), source.failed_hosts, source.absent_hosts,
                    source.fallback_kind)


def peer_hash(meta: ImageMeta) -> bool:
    """Whether the image service gives ``meta`` a hash strong enough to take peer bytes."""
    return has_strong_hash(meta.os_hash_algo, meta.os_hash_value)


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
