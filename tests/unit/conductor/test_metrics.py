"""The conductor's Prometheus metrics: per-host results, host calls in flight, jobs by state."""

from __future__ import annotations

import threading
import urllib.request

from prometheus_client import CollectorRegistry

from fleetcache.common import metrics as common_metrics
from fleetcache.common.db import jobs
from fleetcache.conductor.metrics import ConductorMetrics, JobStateCollector
from fleetcache.conductor.precache import notifications
from fleetcache.conductor.precache.hostpool import HostCallPool
from fleetcache.conductor.precache.precacher import Precacher
from tests.unit.conductor.precache.test_job import (
    IMG_A,
    IMG_B,
    FakeComputes,
    FakeImages,
    _ctxt,
    make_aggregate,
)


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_results_downloads_and_fallbacks_counted_per_host(conf, db):
    agg_id = make_aggregate(db, ["h1", "h2", "h3"])
    computes = FakeComputes({
        "h2": lambda ids: {i: {"state": "cached", "reason": None, "bytes_downloaded": 7,
                               "download_path": "http", "fallback_reason": "fsid differs"}
                           for i in ids},
        "h3": lambda ids: {i: {"state": "error", "reason": "boom", "bytes_downloaded": 0}
                           for i in ids},
    })
    registry = CollectorRegistry()
    in_call = []

    def spy(ctxt, host, image_ids):  # the gauge while a host call is under way
        in_call.append(_value(registry, "fleetcache_conductor_host_calls_in_flight"))
        return FakeComputes.cache_images(computes, ctxt, host, image_ids)

    computes.cache_images = spy  # type: ignore[method-assign]
    host_calls = HostCallPool(1, name="test-metrics")
    precacher = Precacher(
        conf, db, "conductor1", clients=computes, images=FakeImages(),  # type: ignore[arg-type]
        notifier=notifications.CacheNotifier(None), host_calls=host_calls,
        job_runner=lambda f: f(), metrics=ConductorMetrics(registry))
    try:
        precacher.start(_ctxt(), agg_id, [IMG_A, IMG_B])
    finally:
        host_calls.shutdown(wait=True)

    assert in_call == [1.0, 1.0, 1.0]
    assert _value(registry, "fleetcache_conductor_host_calls_in_flight") == 0
    assert _value(registry, "fleetcache_conductor_image_results_total", state="cached") == 4
    assert _value(registry, "fleetcache_conductor_image_results_total", state="error") == 2
    # h1's fake replies name no path (an old compute): not counted as a download
    assert _value(registry, "fleetcache_conductor_image_downloads_total", source="http") == 2
    assert _value(registry, "fleetcache_conductor_image_download_bytes_total",
                  source="http") == 14
    assert _value(registry, "fleetcache_conductor_image_download_fallbacks_total") == 2


def test_group_bytes_split_origin_and_peer_per_group():
    registry = CollectorRegistry()
    metrics = ConductorMetrics(registry)
    metrics.record_group("cell1", {
        IMG_A: {"state": "cached", "reason": None, "bytes_downloaded": 100,
                "download_path": "peer", "bytes_from_peers": 100},
        IMG_B: {"state": "cached", "reason": None, "bytes_downloaded": 50,
                "download_path": "http", "bytes_from_peers": 20}})
    metrics.record_group("cell2/rack7", {
        IMG_A: {"state": "cached", "reason": None, "bytes_downloaded": 100,
                "download_path": "http"},
        IMG_B: {"state": "error", "reason": "boom", "bytes_downloaded": 0}})

    name = "fleetcache_conductor_group_download_bytes_total"
    assert _value(registry, name, group="cell1", source="peer") == 120
    assert _value(registry, name, group="cell1", source="origin") == 30
    assert _value(registry, name, group="cell2/rack7", source="origin") == 100
    assert _value(registry, name, group="cell2/rack7", source="peer") == 0


def test_peer_fallbacks_are_counted_by_reason_not_as_rbd_fallbacks():
    registry = CollectorRegistry()
    metrics = ConductorMetrics(registry)
    metrics.record_host({
        IMG_A: {"state": "cached", "reason": None, "bytes_downloaded": 100,
                "download_path": "http", "fallback_reason": "peer_absent: c1: HTTP 404"},
        IMG_B: {"state": "cached", "reason": None, "bytes_downloaded": 100,
                "download_path": "http", "fallback_reason": "peer_failed: c2: refused"}})
    name = "fleetcache_conductor_peer_fallbacks_total"
    assert [_value(registry, name, reason=r) for r in ("peer_absent", "peer_failed")] == [1, 1]
    assert _value(registry, "fleetcache_conductor_image_download_fallbacks_total") == 0


def test_jobs_by_state_come_from_the_database(db):
    registry = CollectorRegistry()
    registry.register(JobStateCollector(db))
    assert _value(registry, "fleetcache_jobs", state="running") == 0
    for state in (jobs.RUNNING, jobs.DONE, jobs.DONE):
        job = jobs.job_create(db, 1, "u", ["i"], 1, "c")
        jobs.job_set_state(db, job["uuid"], state)
    assert _value(registry, "fleetcache_jobs", state="running") == 1
    assert _value(registry, "fleetcache_jobs", state="done") == 2
    assert _value(registry, "fleetcache_jobs", state="queued") == 0


def test_exporter_serves_its_own_registry_only_and_stops():
    registry = CollectorRegistry()
    ConductorMetrics(registry).in_flight.set(3)
    exporter = common_metrics.start_exporter("127.0.0.1", 0, registry, "test")
    assert exporter is not None
    try:
        url = f"http://127.0.0.1:{exporter.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    finally:
        exporter.stop()
    assert "fleetcache_conductor_host_calls_in_flight 3.0" in text
    assert "python_gc_objects_collected_total" not in text  # not the global registry
    assert not exporter.thread.is_alive()
    assert common_metrics.start_exporter("127.0.0.1", None, registry) is None
    assert threading.active_count() >= 1
