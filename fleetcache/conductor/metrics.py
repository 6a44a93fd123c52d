"""The conductor's Prometheus metrics: host calls in flight, per-host results, downloads by
source as the computes report them, and jobs by state.

:class:`ConductorMetrics` is updated by the pre-cache job (:mod:`.precache`): one gauge
increment and decrement around each host call and one :meth:`~ConductorMetrics.record_host`
per finished host, whose counters are resolved to their label children at start-up so that
each update is one locked addition. Jobs by state are counted by the database when Prometheus
scrapes (:class:`JobStateCollector`), so every conductor sharing the database reports the same
figures (aggregate them with ``max``, not ``sum``).

Metrics::

    fleetcache_conductor_host_calls_in_flight              cache_images calls awaiting a compute
    fleetcache_conductor_image_results_total{state}        per host and image: cached, existing,
                                                           error, unsupported, skipped
    fleetcache_conductor_image_downloads_total{source}     downloads the computes reported
    fleetcache_conductor_image_download_bytes_total{source}
    fleetcache_conductor_image_download_fallbacks_total    rbd -> http, as the computes reported
    fleetcache_conductor_peer_fallbacks_total{reason}      hosts given peers that took (some of)
                                                           an image from the image service:
                                                           no_multihash, peer_failed,
                                                           peer_absent, hash_mismatch,
                                                           no_peer_in_time
    fleetcache_conductor_group_download_bytes_total{group,source}
                                                           with peer distribution on: bytes of
                                                           each peer group's downloads, from
                                                           the image service (origin) or from
                                                           peers (peer)
    fleetcache_jobs{state}                                 pre-cache jobs: queued, scheduled,
                                                           running, catching_up, done, failed
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from fleetcache.common.db import jobs
from fleetcache.common.db.session import Database
from fleetcache.compute.rpcapi import ImageResult

SOURCES = ("http", "rbd", "peer")
#: Why a host given peers fetched from the image service (the reason's first word).
PEER_FALLBACKS = ("no_multihash", "peer_failed", "peer_absent", "hash_mismatch",
                  "no_peer_in_time")


class ConductorMetrics:
    """The conductor's counters and gauge, registered in ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.in_flight = Gauge("fleetcache_conductor_host_calls_in_flight", "cache_images "
                               "calls sent to computes and not answered yet",
                               registry=registry)
        results = Counter("fleetcache_conductor_image_results", "Outcomes of images on hosts "
                          "in pre-cache jobs", ["state"], registry=registry)
        downloads = Counter("fleetcache_conductor_image_downloads", "Image downloads the "
                            "computes reported, by the path the bytes took", ["source"],
                            registry=registry)
        data = Counter("fleetcache_conductor_image_download_bytes", "Bytes the computes "
                       "reported downloading, by the path they took", ["source"],
                       registry=registry)
        self.fallbacks = Counter("fleetcache_conductor_image_download_fallbacks", "Images "
                                 "with an rbd:// location the computes downloaded over HTTP",
                                 registry=registry)
        peer_fallbacks = Counter("fleetcache_conductor_peer_fallbacks", "Images of hosts "
                                 "given peers that came (partly) from the image service, by "
                                 "reason", ["reason"], registry=registry)
        self.peer_fallbacks = {r: peer_fallbacks.labels(r) for r in PEER_FALLBACKS}
        # Label children resolved once (a label look-up per host would take a lock and a
        # dict search on the fan-out's path).
        self.results = {s: results.labels(s) for s in jobs.RESULT_STATES}
        self.downloads = {s: downloads.labels(s) for s in SOURCES}
        self.bytes = {s: data.labels(s) for s in SOURCES}
        #: Label children per peer group, made on a group's first download (groups are the
        #: operator's cells and sites: few, and known only once computes report them).
        self._group_bytes = Counter(
            "fleetcache_conductor_group_download_bytes", "Bytes of each peer group's "
            "downloads in jobs with peer distribution, from the image service or from peers",
            ["group", "source"], registry=registry)

    def record_group(self, group: str, results: Mapping[str, ImageResult]) -> None:
        """Count one host's downloaded bytes for its peer ``group``: what crossed the group's
        link from the image service (``origin``) and what its peers sent (``peer``)."""
        from_peers = origin = 0
        for result in results.values():
            if result["state"] == "cached":
                peers = result.get("bytes_from_peers") or 0
                from_peers += peers
                origin += result["bytes_downloaded"] - peers
        if origin:
            self._group_bytes.labels(group, "origin").inc(origin)
        if from_peers:
            self._group_bytes.labels(group, "peer").inc(from_peers)

    def record_host(self, results: Mapping[str, ImageResult]) -> None:
        """Count one finished host's results (once per host).

        The host's images are summed here first, so that each counter is incremented once
        per host rather than once per image (each increment takes the metric's lock).
        """
        states: dict[str, int] = {}
        downloads: dict[str, int] = {}
        data: dict[str, int] = {}
        fallbacks = 0
        for result in results.values():
            state = result["state"]
            states[state] = states.get(state, 0) + 1
            source = result.get("download_path")
            if state == "cached" and source in self.downloads:
                downloads[source] = downloads.get(source, 0) + 1
                from_peers = result.get("bytes_from_peers") or 0
                data["peer"] = data.get("peer", 0) + from_peers
                data[source] = data.get(source, 0) + result["bytes_downloaded"] - from_peers
                reason = str(result.get("fallback_reason") or "")
                peer_reason = self.peer_fallbacks.get(reason.split(":", 1)[0])
                if peer_reason is not None:
                    peer_reason.inc()
                elif reason:
                    fallbacks += 1
        for state, count in states.items():
            counter = self.results.get(state)
            if counter is not None:
                counter.inc(count)
        for source, count in downloads.items():
            self.downloads[source].inc(count)
        for source, size in data.items():
            if size:
                self.bytes[source].inc(size)
        if fallbacks:
            self.fallbacks.inc(fallbacks)


class JobStateCollector(Collector):
    """``fleetcache_jobs{state}``: one grouped count in the database per scrape."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("fleetcache_jobs", "Pre-cache jobs by state (all "
                                   "conductors: the database's count)", labels=["state"])
        counts = jobs.job_count_by_state(self.db)
        for state in jobs.JOB_STATES:
            family.add_metric([state], counts.get(state, 0))
        yield family
