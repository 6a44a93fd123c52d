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
    fleetcache_jobs{state}                                 pre-cache jobs: queued, running, done,
                                                           failed
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from fleetcache.common.db import jobs
from fleetcache.common.db.session import Database
from fleetcache.compute.rpcapi import ImageResult

SOURCES = ("http", "rbd")


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
        # Label children resolved once (a label look-up per host would take a lock and a
        # dict search on the fan-out's path).
        self.results = {s: results.labels(s) for s in jobs.RESULT_STATES}
        self.downloads = {s: downloads.labels(s) for s in SOURCES}
        self.bytes = {s: data.labels(s) for s in SOURCES}

    def record_host(self, results: Mapping[str, ImageResult]) -> None:
        """Count one finished host's results (once per host)."""
        for result in results.values():
            counter = self.results.get(result["state"])
            if counter is not None:
                counter.inc()
            source = result.get("download_path")
            if result["state"] == "cached" and source in self.downloads:
                self.downloads[source].inc()
                self.bytes[source].inc(result["bytes_downloaded"])
                if result.get("fallback_reason"):
                    self.fallbacks.inc()


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
