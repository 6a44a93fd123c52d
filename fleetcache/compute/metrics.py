"""The compute's Prometheus metrics: image downloads by source, verification failures,
fallbacks from Ceph to HTTP, and the image cache's size.

The counters are updated by :class:`~fleetcache.compute.manager.ComputeManager` from what each
``cache_image`` returned or raised, once per image request, so the download pipeline itself
holds no metrics code. The cache's size and entries are read from its directory when
Prometheus scrapes (:class:`ImageCacheCollector`), so they are always current and cost nothing
between scrapes.

Metrics (``source`` is ``http``, ``rbd`` or ``peer``, the path the bytes took)::

    fleetcache_compute_image_downloads_total{source}         images downloaded
    fleetcache_compute_image_download_bytes_total{source}    bytes downloaded (peer bytes
                                                             under ``peer``, whatever path
                                                             published the image)
    fleetcache_compute_image_download_seconds{source}        time to cache one image (histogram)
    fleetcache_compute_image_requests_total{result}          cached, existing, error,
                                                             unsupported, skipped, paused
    fleetcache_compute_image_skips_total{reason}             disk (below disk_free_floor)
    fleetcache_compute_image_verification_failures_total{check}  checksum, signature, format
    fleetcache_compute_image_download_fallbacks_total        rbd -> http
    fleetcache_compute_image_cache_bytes                     disk used by cached images
    fleetcache_compute_image_cache_entries                   cached images
    fleetcache_compute_peer_fallbacks_total{reason}          peers given, not (only) used:
                                                             no_multihash, peer_failed,
                                                             peer_absent, hash_mismatch
    fleetcache_compute_peer_requests_total{code}             answers of the peer image server
    fleetcache_compute_peer_denied_total{reason}             its refusals (peer_tokens.REASONS)
    fleetcache_compute_peer_upload_bytes_total               bytes it sent
    fleetcache_compute_peer_uploads_in_flight                uploads under way
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from fleetcache.common import exception, peer_tokens
from fleetcache.compute.imagecache import CacheOutcome, ImageCache
from fleetcache.compute.peers.source import FallbackKind

SOURCES = ("http", "rbd", "peer")
#: Why peers were given but not (only) used (the first word of ``peer_fallback``).
PEER_FALLBACKS = ("no_multihash", "peer_failed", "peer_absent", "hash_mismatch")
RESULTS = ("cached", "existing", "error", "unsupported", "skipped", "paused")
#: Why a compute refused to cache an image (``skipped``): only the disk floor so far.
SKIP_REASONS = ("disk",)
#: Which failures are a verification failure, by the check that refused the bytes.
CHECKS: tuple[tuple[type[Exception], str], ...] = (
    (exception.ImageChecksumMismatch, "checksum"),
    (exception.ImageSignatureVerificationFailed, "signature"),
    (exception.ImageFormatRejected, "format"),
)
#: Seconds to cache one image: a few MiB over a LAN take well under a second, a multi-GiB
#: image over a busy link minutes.
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)


class ComputeMetrics:
    """The compute's counters, registered in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        downloads = Counter("fleetcache_compute_image_downloads", "Images downloaded into "
                            "the image cache, by the path the bytes took", ["source"],
                            registry=registry)
        data = Counter("fleetcache_compute_image_download_bytes", "Bytes downloaded into the "
                       "image cache, by the path they took", ["source"], registry=registry)
        seconds = Histogram("fleetcache_compute_image_download_seconds", "Time to download, "
                            "verify and publish one image, by the path its bytes took",
                            ["source"], buckets=DURATION_BUCKETS, registry=registry)
        requests = Counter("fleetcache_compute_image_requests", "Images asked for by "
                           "pre-cache requests, by their result", ["result"], registry=registry)
        skips = Counter("fleetcache_compute_image_skips", "Images a pre-cache request asked "
                        "for that this compute refused to cache, by reason (disk: below "
                        "[image_cache] disk_free_floor)", ["reason"], registry=registry)
        failures = Counter("fleetcache_compute_image_verification_failures", "Downloads "
                           "refused by a check of their bytes", ["check"], registry=registry)
        self.fallbacks = Counter("fleetcache_compute_image_download_fallbacks", "Images with "
                                 "an rbd:// location downloaded over HTTP instead",
                                 registry=registry)
        # Children resolved once: recording is then an increment, with no label look-up.
        self.downloads = {s: downloads.labels(s) for s in SOURCES}
        self.bytes = {s: data.labels(s) for s in SOURCES}
        self.seconds = {s: seconds.labels(s) for s in SOURCES}
        self.requests = {r: requests.labels(r) for r in RESULTS}
        self.failures = {check: failures.labels(check) for _exc, check in CHECKS}
        self.skips = {r: skips.labels(r) for r in SKIP_REASONS}
        self._peer_metrics(registry)

    def _peer_metrics(self, registry: CollectorRegistry) -> None:
        fallbacks = Counter("fleetcache_compute_peer_fallbacks", "Downloads given peers that "
                            "did not take all their bytes from them, by reason", ["reason"],
                            registry=registry)
        self.peer_fallbacks = {r: fallbacks.labels(r) for r in PEER_FALLBACKS}
        self.peer_requests = Counter("fleetcache_compute_peer_requests", "Requests the peer "
                                     "image server answered, by status code", ["code"],
                                     registry=registry)
        denied = Counter("fleetcache_compute_peer_denied", "Requests the peer image server "
                         "refused, by reason", ["reason"], registry=registry)
        self.peer_denied = {r: denied.labels(r) for r in peer_tokens.REASONS}
        self.peer_upload_bytes = Counter("fleetcache_compute_peer_upload_bytes", "Bytes the "
                                         "peer image server sent", registry=registry)
        self.peer_uploads = Gauge("fleetcache_compute_peer_uploads_in_flight", "Uploads of "
                                  "the peer image server under way", registry=registry)

    def record_outcome(self, outcome: CacheOutcome, seconds: float) -> None:
        """An image request that ended cached (downloaded now) or existing."""
        if not outcome.downloaded:
            self.requests["existing"].inc()
            return
        self.requests["cached"].inc()
        source = outcome.download_path if outcome.download_path in SOURCES else "http"
        self.downloads[source].inc()
        origin = "http" if source == "peer" else source
        if outcome.bytes_from_peers or outcome.bytes_from_origin:
            self.bytes["peer"].inc(outcome.bytes_from_peers)
            self.bytes[origin].inc(outcome.bytes_from_origin)
        else:
            self.bytes[source].inc(outcome.bytes_downloaded)
        self.seconds[source].observe(seconds)
        if outcome.fallback_reason is not None:
            self.fallbacks.inc()
        reason = (outcome.peer_fallback or "").partition(":")[0]
        if reason in self.peer_fallbacks:
            self.peer_fallbacks[reason].inc()

    def record_refused_peers(self, bytes_from_peers: int, bytes_from_origin: int,
                             check: BaseException | None) -> None:
        """Peer bytes refused by ``check``'s failure and given back to the conductor (compute
        RPC 1.6): an ``error`` request and a ``hash_mismatch`` fallback, the bytes fetched
        counted as any download's (they crossed the network before they were dropped)."""
        self.record_failure("error", check)
        self.bytes["peer"].inc(bytes_from_peers)
        self.bytes["http"].inc(bytes_from_origin)
        self.peer_fallbacks["hash_mismatch"].inc()

    def record_peers_gone(self, bytes_from_peers: int,
                          kind: FallbackKind = "peer_failed") -> None:
        """Every peer of a download failed (``kind`` ``peer_failed``) or lacked the image
        (``peer_absent``), and the image went back to the conductor with the bytes kept
        (compute RPC 1.7): a fallback of that kind, the bytes counted as fetched from peers.
        No request outcome: the conductor's next call for the image counts its own (an
        ``error`` here would count a fault the job recovers from)."""
        self.bytes["peer"].inc(bytes_from_peers)
        self.peer_fallbacks[kind].inc()

    def record_peer_request(self, code: int) -> None:
        """The peer image server answered a request with ``code``."""
        self.peer_requests.labels(str(code)).inc()

    def record_peer_denied(self, reason: str) -> None:
        """The peer image server refused a request for ``reason``."""
        if reason in self.peer_denied:
            self.peer_denied[reason].inc()

    def record_peer_upload(self, sent: int, in_flight: int) -> None:
        """An upload ended having sent ``sent`` bytes; ``in_flight`` are still under way."""
        self.peer_upload_bytes.inc(sent)
        self.peer_uploads.set(in_flight)

    def record_paused(self) -> None:
        """An image request the call's end time stopped, or never let start (``paused``)."""
        self.requests["paused"].inc()

    def record_skip(self, reason: str) -> None:
        """An image request refused without an error (``skipped``), for ``reason``."""
        self.requests["skipped"].inc()
        self.skips[reason].inc()

    def record_failure(self, result: str, error: BaseException | None = None) -> None:
        """An image request that ended ``error`` (with its exception) or ``unsupported``."""
        self.requests[result].inc()
        for exc_type, check in CHECKS:
            if isinstance(error, exc_type):
                self.failures[check].inc()
                return


class ImageCacheCollector(Collector):
    """The image cache's disk usage and entries, measured at each scrape."""

    def __init__(self, cache: ImageCache) -> None:
        self.cache = cache

    def collect(self) -> Iterator[GaugeMetricFamily]:
        entries = self.cache.list_entries()
        yield GaugeMetricFamily("fleetcache_compute_image_cache_bytes",
                                "Disk used by the complete images of the image cache",
                                value=sum(e.disk_usage for e in entries))
        yield GaugeMetricFamily("fleetcache_compute_image_cache_entries",
                                "Complete images in the image cache", value=len(entries))
