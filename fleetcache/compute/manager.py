"""The compute agent's RPC endpoint (topic ``compute``): thin, delegating to the virt driver,
to :mod:`~fleetcache.compute.instance_disks` and to the image cache manager
(:mod:`~fleetcache.compute.imagecache.ageing`).

Cache reports leave through an injected report function: the compute service builds it from
its conductor client (:mod:`fleetcache.cmd.compute`), so this room never calls another's RPC
API itself."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import oslo_messaging as messaging
from oslo_config import cfg
from oslo_utils import uuidutils

from fleetcache.common import exception, rpc
from fleetcache.common.context import RequestContext
from fleetcache.compute import rpcapi
from fleetcache.compute.imagecache import (
    DownloadPaused,
    DownloadTerms,
    ImageCacheManager,
    PeerBytesRefused,
    PeersGone,
    ReportFunc,
    manager_interval,
)
from fleetcache.compute.instance_disks import InstanceDisks
from fleetcache.compute.long_calls import LongCallSlots
from fleetcache.compute.metrics import ComputeMetrics
from fleetcache.compute.peers import ServeGrants
from fleetcache.compute.peers.inflight import expect_download
from fleetcache.compute.rpcapi import ImageResult, Peer
from fleetcache.compute.virt import driver as virt_driver

LOG = logging.getLogger(__name__)


class ComputeManager:
    """Serves the compute RPC API on one host.

    :param report: sends the image cache's contents (to the conductor, in the service);
        ``None`` sends none. Its errors are logged, never raised.
    :param metrics: counts each image request's outcome (the service's Prometheus registry);
        ``None`` counts nothing.
    :param grants: what this host's image server serves to peers (``serve_images`` opens
        them); ``None``: it runs no image server and serves nothing.
    """

    target = messaging.Target(version=rpcapi.RPC_API_VERSION)

    def __init__(self, conf: cfg.ConfigOpts, driver: virt_driver.ComputeDriver,
                 report: ReportFunc | None = None,
                 long_calls: LongCallSlots | None = None,
                 metrics: ComputeMetrics | None = None,
                 grants: ServeGrants | None = None) -> None:
        self.conf = conf
        self.driver = driver
        self.metrics = metrics
        self.grants = grants
        self.instance_disks: InstanceDisks | None = None
        self.cache_manager: ImageCacheManager | None = None
        if driver.image_cache is not None:
            self.instance_disks = InstanceDisks(conf, driver.image_cache)
            self.cache_manager = ImageCacheManager(conf, driver.image_cache, report)
        #: Long calls admitted at once; ``fleetcache-compute`` passes the limit its RPC server
        #: allows (:func:`.long_calls.effective_limit`), else ``max_concurrent_long_calls``.
        self.long_calls = long_calls or LongCallSlots(
            conf.compute.max_concurrent_long_calls, conf.host)
        self._reported_once = False

    def cache_images(self, ctxt: RequestContext, image_ids: list[str],
                     pin_until: float | None = None,
                     peers: dict[str, list[Peer]] | None = None,
                     until: float | None = None,
                     bytes_per_second: int | None = None,
                     origin_after_refused_peers: bool = True,
                     origin_after_failed_peers: bool = True) -> dict[str, ImageResult]:
        """Cache each image in order, then report the cache (the report function); never raises.

        A call beyond ``[compute] max_concurrent_long_calls`` is answered at once with every
        image in ``error``, the reason naming the limit (see :mod:`.long_calls`). An image
        that would bring the cache's free space below ``[image_cache] disk_free_floor`` is
        ``skipped`` with the reason ``disk``, nothing of it left on disk.

        :param pin_until: epoch seconds until which the ageing pass keeps the images (1.2).
        :param peers: per image, hosts of this one's peer group to fetch it from before the
            image service (1.4); the image service still says what the bytes must be.
        :param until: epoch seconds at which a download still under way stops within about
            a second, what it wrote kept as the image's paused download, and the image
            ``paused``; images not started by then are ``paused`` with 0 bytes (1.5). The
            next call resumes a paused download (re-checked from its first byte).
        :param bytes_per_second: the pace of each of this call's downloads, on top of the
            host's ``[image_cache] max_download_bytes_per_second`` (the stricter wins; 1.5).
        :param origin_after_refused_peers: False: an image whose peer bytes a check refused
            is not fetched again from the image service by this call but ``error`` with
            ``fallback_reason`` ``hash_mismatch: <peers>`` and ``bad_peers``: the conductor
            names its next source (1.6).
        :param origin_after_failed_peers: False: an image whose peers all failed in
            transport is not fetched from the image service by this call but ``error`` with
            ``fallback_reason`` ``peer_failed: ...`` (``peer_absent: ...``: every peer only
            lacked the image) and ``failed_peers``, the bytes written kept as its paused
            download for a next call from the image service: the conductor names the next
            source, under its caps (1.7).
        :returns: ``{image_id: {"state": cached|existing|error|unsupported|skipped|paused,
            "reason": ..., "bytes_downloaded": N, "download_path": rbd|http|peer|None,
            "fallback_reason": ..., "source_host": ..., "bytes_from_peers": N, "bad_peers":
            [...], "failed_peers": [...], "absent_peers": [...], "bytes_resumed": N}}``, one
            entry per requested image.
        """
        peers = peers if isinstance(peers, dict) else {}
        LOG.debug("cache_images: %s", ", ".join(image_ids))
        terms = _terms(until, bytes_per_second, origin_after_refused_peers,
                       origin_after_failed_peers)
        if isinstance(terms, str):
            LOG.warning("cache_images refused: %s", terms)
            return {image_id: ImageResult(state="error", reason=terms, bytes_downloaded=0)
                    for image_id in image_ids}
        try:
            with self.long_calls.hold("cache_images"):
                results = {image_id: self._cache_one(ctxt, image_id, pin_until,
                                                     peers.get(image_id) or (), terms)
                           for image_id in image_ids}
                if self.cache_manager is not None:
                    self.cache_manager.report()
        except exception.ComputeBusy as exc:
            LOG.warning("%s", exc)
            return {image_id: ImageResult(state="error", reason=str(exc), bytes_downloaded=0)
                    for image_id in image_ids}
        return results

    @rpc.expected_exceptions(exception.Invalid)
    def serve_images(self, ctxt: RequestContext, job_uuid: str, key: str,
                     image_ids: list[str], until: float) -> list[str]:
        """Serve ``image_ids`` to the peers of job ``job_uuid`` until ``until`` (1.4).

        Only images cached with their own bytes are served (a base converted for the disk
        backend is not what the image service holds), each pinned until ``until`` so that
        the ageing pass keeps it while peers may still ask. With ``[image_cache]
        peer_cut_through``, an image with no base here yet is served too, from its download
        once it runs (:func:`~fleetcache.compute.peers.inflight.expect_download`); the
        conductor asks again when it is complete, which pins it. A host without an image
        server serves nothing.

        :returns: the images served.
        :raises InvalidInput: a malformed job id, key, image list or time.
        """
        grants, cache = self.grants, self.driver.image_cache
        if grants is None or cache is None:
            return []
        _check_serve_request(job_uuid, key, image_ids, until)
        served = [i for i in dict.fromkeys(image_ids)
                  if (cache.servable(i) is not None and cache.pin(i, until))
                  or expect_download(self.conf, cache, i)]
        grants.open(job_uuid, key, served, until)
        LOG.info("Serving %d of %d image(s) to the peers of job %s until %s", len(served),
                 len(image_ids), job_uuid, time.strftime("%H:%M:%S", time.gmtime(until)))
        return served

    @rpc.expected_exceptions(exception.Invalid, exception.NotFound, exception.Conflict,
                             exception.ImageFetchError, exception.QemuImgError,
                             exception.RbdError, exception.DiskCreateFailed)
    def create_instance_disk(self, ctxt: RequestContext, instance_uuid: str, image_id: str,
                             size: int | None = None) -> rpcapi.InstanceDiskResult:
        """Create the instance's disk from ``image_id`` (see :class:`InstanceDisks`).

        :raises InstanceDisksNotSupported: when the virt driver keeps no image cache, or the
            backend chosen for the image is not implemented.
        :raises ComputeBusy: at once, beyond ``[compute] max_concurrent_long_calls``.
        """
        if self.instance_disks is None or self.cache_manager is None:
            raise exception.InstanceDisksNotSupported(
                reason=f"virt driver {type(self.driver).__name__} keeps no image cache")
        with self.long_calls.hold("create_instance_disk"):
            result = self.instance_disks.create(ctxt, instance_uuid, image_id, size)
            if result["image_fetched"]:
                self.cache_manager.report()
        return result

    @rpc.expected_exceptions(exception.Invalid, exception.RbdError)
    def delete_instance_disk(self, ctxt: RequestContext, instance_uuid: str) -> bool:
        """Remove the instance's directory; returns whether there was one.

        :raises InstanceDisksNotSupported: when the virt driver keeps no image cache.
        """
        if self.instance_disks is None:
            raise exception.InstanceDisksNotSupported(
                reason=f"virt driver {type(self.driver).__name__} keeps no image cache")
        return self.instance_disks.delete(instance_uuid)

    @rpc.expected_exceptions(NotImplementedError)
    def get_host_uptime(self, ctxt: RequestContext) -> str:
        """The host's uptime as ``uptime(1)`` prints it (1.3; Nova's method of that name).

        :raises NotImplementedError: when the virt driver cannot tell.
        """
        return self.driver.get_host_uptime()

    # -- periodic ---------------------------------------------------------------------------

    def image_cache_manager_interval(self) -> float | None:
        """Seconds between ageing passes; ``None`` when there is no pass to run."""
        if self.cache_manager is None:
            return None
        return manager_interval(self.conf)

    def run_image_cache_manager_pass(self) -> None:
        """The periodic task: the first run (at start-up) only reports the cache, as Nova's
        first pass comes one interval after start; every later run is an ageing pass."""
        if self.cache_manager is None:
            return
        if not self._reported_once:
            self._reported_once = True
            self.cache_manager.report()
            return
        self.cache_manager.run_pass()

    # -- helpers ----------------------------------------------------------------------------

    def _cache_one(self, ctxt: RequestContext, image_id: str,
                   pin_until: float | None = None, peers: Sequence[Peer] = (),
                   terms: DownloadTerms | None = None) -> ImageResult:
        started = time.monotonic()
        # Only what is given: drivers (and doubles) from before peers or terms take neither.
        kwargs: dict[str, Any] = {}
        if peers:
            kwargs["peers"] = peers
        if terms is not None:
            kwargs["terms"] = terms
        try:
            outcome = self.driver.cache_image(ctxt, image_id, **kwargs)
            if pin_until is not None and self.driver.image_cache is not None:
                self.driver.image_cache.pin(image_id, pin_until)
        except PeerBytesRefused as refused:
            if self.metrics is not None:
                self.metrics.record_refused_peers(refused.bytes_from_peers,
                                                  refused.bytes_from_origin, refused.__cause__)
            return _naming_absent(ImageResult(
                state="error", reason=str(refused),
                bytes_downloaded=refused.bytes_from_peers + refused.bytes_from_origin,
                download_path="peer", fallback_reason=f"hash_mismatch: "
                f"{','.join(refused.bad_peers)}", source_host=refused.bad_peers[-1],
                bytes_from_peers=refused.bytes_from_peers, bad_peers=list(refused.bad_peers)),
                refused.absent_peers)
        except PeersGone as gone:
            if self.metrics is not None:
                self.metrics.record_peers_gone(gone.bytes_downloaded, gone.kind)
            return _naming_absent(ImageResult(
                state="error", reason=gone.reason, bytes_downloaded=gone.bytes_downloaded,
                download_path="peer", fallback_reason=gone.fallback,
                source_host=gone.source_host, bytes_from_peers=gone.bytes_downloaded,
                failed_peers=list(gone.failed_peers)), gone.absent_peers)
        except DownloadPaused as paused:
            LOG.info("Image %s: %s", image_id, paused.reason)
            if self.metrics is not None:
                self.metrics.record_paused()
            return _naming_absent(ImageResult(
                state=rpcapi.PAUSED, reason=paused.reason,
                bytes_downloaded=paused.bytes_downloaded, bytes_resumed=paused.bytes_resumed),
                paused.absent_peers)
        except NotImplementedError:
            if self.metrics is not None:
                self.metrics.record_failure("unsupported")
            LOG.warning(
                "Virt driver %s does not support image caching; image %s not cached",
                type(self.driver).__name__,
                image_id,
            )
            return ImageResult(state="unsupported", reason="driver has no image cache",
                               bytes_downloaded=0)
        except exception.DiskFloorReached as exc:
            LOG.warning("%s", exc)
            if self.metrics is not None:
                self.metrics.record_skip(rpcapi.SKIPPED_DISK)
            return ImageResult(state="skipped", reason=rpcapi.SKIPPED_DISK, bytes_downloaded=0)
        except Exception as exc:
            LOG.exception("Caching image %s failed", image_id)
            if self.metrics is not None:
                self.metrics.record_failure("error", exc)
            return ImageResult(state="error", reason=str(exc) or type(exc).__name__,
                               bytes_downloaded=0)
        if self.metrics is not None:
            self.metrics.record_outcome(outcome, time.monotonic() - started)
        state = "cached" if outcome.downloaded else "existing"
        # With peers, every byte fetched counts, wasted ones included (refused peer bytes,
        # then the origin's copy): ``bytes_from_peers`` is a part of ``bytes_downloaded``,
        # so that the rest is what came from the image service.
        fetched = (outcome.bytes_from_peers + outcome.bytes_from_origin
                   if peers and outcome.downloaded else outcome.bytes_downloaded)
        result = ImageResult(state=state, reason=None,
                             bytes_downloaded=fetched,
                             download_path=outcome.download_path,
                             fallback_reason=outcome.peer_fallback or outcome.fallback_reason)
        if peers:  # a call without peers answers as before 1.4
            result["source_host"] = outcome.source_host
            result["bytes_from_peers"] = outcome.bytes_from_peers
            result["bad_peers"] = list(outcome.bad_peers)
            _naming_absent(result, outcome.absent_peers)
        if outcome.bytes_resumed:
            result["bytes_resumed"] = outcome.bytes_resumed
        return result


def _naming_absent(result: ImageResult, absent_peers: Sequence[str]) -> ImageResult:
    """``result`` with ``absent_peers`` when there are any: the key is optional (no RPC
    version of its own), so a reply without absent peers is the same as before it."""
    if absent_peers:
        result["absent_peers"] = list(absent_peers)
    return result


def _terms(until: object, bytes_per_second: object,
           origin_after_refused_peers: object = True,
           origin_after_failed_peers: object = True) -> DownloadTerms | None | str:
    """The call's terms (None: it has none), or why they are malformed."""
    if not isinstance(origin_after_refused_peers, bool):
        return f"bad origin_after_refused_peers {origin_after_refused_peers!r}"
    if not isinstance(origin_after_failed_peers, bool):
        return f"bad origin_after_failed_peers {origin_after_failed_peers!r}"
    if (until is None and bytes_per_second is None and origin_after_refused_peers
            and origin_after_failed_peers):
        return None
    if until is not None and (not isinstance(until, int | float) or isinstance(until, bool)):
        return f"bad end time {until!r}"
    if bytes_per_second is not None and (not isinstance(bytes_per_second, int)
                                         or isinstance(bytes_per_second, bool)
                                         or bytes_per_second <= 0):
        return f"bad rate {bytes_per_second!r} (bytes per second, a positive integer)"
    return DownloadTerms(until=None if until is None else float(until),
                         bytes_per_second=bytes_per_second,
                         origin_after_refused_peers=origin_after_refused_peers,
                         origin_after_failed_peers=origin_after_failed_peers)


def _check_serve_request(job_uuid: object, key: object, image_ids: object,
                         until: object) -> None:
    """:raises InvalidInput: naming the first malformed argument of ``serve_images``."""
    if not (isinstance(job_uuid, str) and uuidutils.is_uuid_like(job_uuid)):
        raise exception.InvalidInput(reason=f"bad job id {job_uuid!r}")
    if not (isinstance(key, str) and len(key) == 64
            and all(c in "0123456789abcdef" for c in key)):
        raise exception.InvalidInput(reason="a peer key is 64 lower-case hex digits")
    if not (isinstance(image_ids, list)
            and all(isinstance(i, str) and uuidutils.is_uuid_like(i) for i in image_ids)):
        raise exception.InvalidInput(reason=f"bad image ids {image_ids!r}")
    if not isinstance(until, int | float) or isinstance(until, bool):
        raise exception.InvalidInput(reason=f"bad time {until!r}")
