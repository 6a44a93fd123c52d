"""The paths an image's bytes take into the cache (``peer``, ``rbd``, ``http``) and the
fallbacks between them; every path feeds the same checked download
(:func:`~fleetcache.compute.imagecache.download.download_checked`).

* **peers** (a pre-cache job's sources, :mod:`fleetcache.compute.peers`), only for an image
  with a multihash (:data:`~fleetcache.image.verify.STRONG_HASHES`): peers that fail in
  transport hand over to the next; after the last, the origin resumes at the bytes written
  when it can (the image service's ``Range``), else the image comes from the origin from
  byte 0. Bytes refused by a check
  (hash, signature, format), whoever sent them, are dropped and the image is fetched again
  from the origin from byte 0, the peers that sent them named;
* **rbd**: the direct path from Ceph (:mod:`~fleetcache.compute.imagecache.direct`) for an
  image with an ``rbd://`` location of this compute's cluster; any failure leaves nothing
  and falls back to HTTP, the reason kept;
* **http**: the image source.

Metadata always comes from the image source (the caller's ``meta``), never from a peer.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence

from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache.direct import RbdDirect
from fleetcache.compute.imagecache.download import CheckFactory, Published, download_checked
from fleetcache.compute.peers.source import PeersFailed, PeerSource
from fleetcache.compute.rpcapi import Peer
from fleetcache.image import ImageMeta, ImageSource, ProgressCallback
from fleetcache.image.verify import has_strong_hash

LOG = logging.getLogger(__name__)

#: Errors that mean the bytes themselves were refused (not the transfer).
REFUSED_BYTES: tuple[type[Exception], ...] = (
    exception.ImageChecksumMismatch, exception.ImageSignatureVerificationFailed,
    exception.ImageFormatRejected)


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


class DownloadPaths:
    """Downloads one image into ``final`` by the first path that works.

    :param checks: the cache's checks (signatures), run on every path.
    :param direct: the direct path from Ceph; None: no ``rbd`` path.
    :ivar direct_fallbacks: direct downloads that fell back to HTTP since start-up.
    """

    def __init__(self, conf: cfg.ConfigOpts, checks: Sequence[CheckFactory],
                 direct: RbdDirect | None) -> None:
        self.conf = conf
        self.checks = tuple(checks)
        self.direct = direct
        self.direct_fallbacks = 0

    def download(self, ctxt: RequestContext, source: ImageSource, meta: ImageMeta,
                 final: str, prefix: str, progress: ProgressCallback | None,
                 peers: Sequence[Peer] = ()) -> Fetched:
        """Download ``meta`` (as ``source`` describes it) to ``final`` through a temporary
        ``<prefix>XXXX`` beside it (the caller holds the image's lock).

        :raises: as :meth:`~fleetcache.compute.imagecache.cache.ImageCache.fetch`; nothing
            is left behind.
        """
        if peers and peer_hash(meta):
            return self._from_peers(ctxt, source, meta, final, prefix, progress, peers)
        got = self._from_origin(ctxt, source, meta, final, prefix, progress)
        return dataclasses.replace(got, peer_fallback="no_multihash") if peers else got

    def _from_peers(self, ctxt: RequestContext, origin: ImageSource, meta: ImageMeta,
                    final: str, prefix: str, progress: ProgressCallback | None,
                    peers: Sequence[Peer]) -> Fetched:
        """One checked download from ``peers`` (then the origin resuming); on any failure,
        the origin from byte 0."""
        source = PeerSource(self.conf, peers, origin=origin)
        try:
            published = download_checked(self.conf, source, ctxt, meta, self.checks, final,
                                         prefix, progress)
        except REFUSED_BYTES as exc:
            bad = source.contributors
            if not bad:
                raise  # refused before any peer byte: the image itself, not a peer
            why = f"hash_mismatch: {','.join(bad)}"
            LOG.warning("Image %s: bytes from peers %s refused (%s); fetching it from the "
                        "origin", meta.id, ", ".join(bad), exc)
            return self._after_peers(ctxt, origin, meta, final, prefix, progress, source, why,
                                     bad)
        except Exception as exc:  # whatever went wrong, the origin is the way out
            why = (f"peer_failed: {exc.kwargs.get('reason')}" if isinstance(exc, PeersFailed)
                   else f"peer_failed: {source.failure()}: {type(exc).__name__}: {exc}")
            LOG.warning("Image %s: %s; fetching it from the origin", meta.id, why)
            return self._after_peers(ctxt, origin, meta, final, prefix, progress, source, why,
                                     ())
        from_origin = source.bytes_from_origin
        return Fetched(published, "http" if from_origin else "peer",
                       source_host=source.last_peer, bytes_from_peers=source.bytes_from_peers,
                       bytes_from_origin=from_origin,
                       peer_fallback=f"peer_failed: {source.failure()}" if from_origin
                       else None)

    def _after_peers(self, ctxt: RequestContext, origin: ImageSource, meta: ImageMeta,
                     final: str, prefix: str, progress: ProgressCallback | None,
                     source: PeerSource, why: str, bad: tuple[str, ...]) -> Fetched:
        """The origin download from byte 0 after peers failed, counting the peers' bytes."""
        got = self._from_origin(ctxt, origin, meta, final, prefix, progress)
        return dataclasses.replace(
            got, source_host=source.last_peer, bytes_from_peers=source.bytes_from_peers,
            bytes_from_origin=got.bytes_from_origin + source.bytes_from_origin,
            peer_fallback=why, bad_peers=bad)

    def _from_origin(self, ctxt: RequestContext, source: ImageSource, meta: ImageMeta,
                     final: str, prefix: str, progress: ProgressCallback | None) -> Fetched:
        """One checked download from Ceph when the direct path applies, else, or when it
        fails in any way (nothing of it is left), over HTTP."""
        route = self.direct.route(meta) if self.direct is not None else None
        fallback = route.fallback if route is not None else None
        if route is not None and route.location is not None:
            assert self.direct is not None
            rbd = self.direct.source(route.location, os.path.dirname(final), prefix)
            try:
                published = download_checked(self.conf, rbd, ctxt, meta, self.checks, final,
                                             prefix, progress)
            except Exception as exc:
                fallback = f"{type(exc).__name__}: {exc}"
            else:
                return Fetched(published, "rbd", bytes_from_origin=published.bytes_downloaded)
        if fallback is not None:
            self.direct_fallbacks += 1
            LOG.warning("Image %s: direct download from Ceph not used, downloading over HTTP "
                        "(fallback %d on this host): %s", meta.id, self.direct_fallbacks,
                        fallback)
        try:
            published = download_checked(self.conf, source, ctxt, meta, self.checks, final,
                                         prefix, progress)
        except exception.FleetcacheException as exc:
            if fallback is None:
                raise
            raise both_failed(exc, fallback) from exc
        return Fetched(published, "http", fallback, bytes_from_origin=published.bytes_downloaded)


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
