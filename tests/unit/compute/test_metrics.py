"""The compute's Prometheus metrics, recorded by the manager from each image's outcome."""

from __future__ import annotations

import pathlib
from typing import Any

from prometheus_client import CollectorRegistry

from fleetcache.common import exception
from fleetcache.compute.imagecache import CacheOutcome
from fleetcache.compute.manager import ComputeManager
from fleetcache.compute.metrics import ComputeMetrics, ImageCacheCollector
from fleetcache.compute.virt.disk import DiskDriver
from fleetcache.compute.virt.driver import ComputeDriver
from fleetcache.image.local import LocalImageSource
from tests.unit.compute.diskfixtures import CTXT, Host


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


class ScriptedDriver(ComputeDriver):
    """Answers each image id with the outcome or exception scripted for it."""

    def __init__(self, conf: Any, script: dict[str, Any]) -> None:
        super().__init__(conf)
        self.script = script

    def cache_image(self, ctxt: Any, image_id: str) -> CacheOutcome:
        answer = self.script[image_id]
        if isinstance(answer, BaseException):
            raise answer
        outcome: CacheOutcome = answer
        return outcome


def test_outcomes_downloads_fallbacks_and_verification_failures(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path, host="compute-1")
    registry = CollectorRegistry()
    driver = ScriptedDriver(host.conf, {
        "rbd": CacheOutcome(True, 100, "rbd"),
        "http": CacheOutcome(True, 40, "http", fallback_reason="rbd export failed"),
        "hit": CacheOutcome(False),
        "bad-hash": exception.ImageChecksumMismatch(image_id="bad-hash", reason="sha512"),
        "bad-sig": exception.ImageSignatureVerificationFailed(image_id="bad-sig", reason="x"),
        "bad-format": exception.ImageFormatRejected(image_id="bad-format", reason="vmdk"),
        "gone": exception.ImageFetchError(image_id="gone", reason="HTTP 500"),
        "none": NotImplementedError(),
        "full": exception.DiskFloorReached(image_id="full", reason="1 MiB free"),
    })
    manager = ComputeManager(host.conf, driver, metrics=ComputeMetrics(registry))
    results = manager.cache_images(CTXT, list(driver.script))

    assert results["bad-hash"]["state"] == "error"
    assert results["full"] == {"state": "skipped", "reason": "disk", "bytes_downloaded": 0}
    downloads = "fleetcache_compute_image_downloads_total"
    assert _value(registry, downloads, source="rbd") == 1
    assert _value(registry, downloads, source="http") == 1
    assert _value(registry, "fleetcache_compute_image_download_bytes_total", source="rbd") == 100
    assert _value(registry, "fleetcache_compute_image_download_seconds_count", source="rbd") == 1
    assert _value(registry, "fleetcache_compute_image_download_fallbacks_total") == 1
    requests = "fleetcache_compute_image_requests_total"
    assert [_value(registry, requests, result=r)
            for r in ("cached", "existing", "error", "unsupported", "skipped")] == [2, 1, 4, 1, 1]
    assert _value(registry, "fleetcache_compute_image_skips_total", reason="disk") == 1
    failures = "fleetcache_compute_image_verification_failures_total"
    assert [_value(registry, failures, check=c)
            for c in ("checksum", "signature", "format")] == [1, 1, 1]


def test_cache_size_and_entries_measured_at_scrape(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path, host="compute-1")
    driver = DiskDriver(host.conf, LocalImageSource(host.conf))
    driver.image_cache.ensure_dirs()
    registry = CollectorRegistry()
    registry.register(ImageCacheCollector(driver.image_cache))
    assert _value(registry, "fleetcache_compute_image_cache_entries") == 0
    driver.cache_image(CTXT, host.add_raw())
    assert _value(registry, "fleetcache_compute_image_cache_entries") == 1
    assert _value(registry, "fleetcache_compute_image_cache_bytes") >= 1024 * 1024


def test_peer_bytes_fallbacks_and_the_image_server_counted(tmp_path: pathlib.Path) -> None:
    registry = CollectorRegistry()
    metrics = ComputeMetrics(registry)
    metrics.record_outcome(CacheOutcome(True, 100, "peer", source_host="c1",
                                        bytes_from_peers=100), 1.0)
    metrics.record_outcome(CacheOutcome(True, 100, "http", bytes_from_peers=60,
                                        bytes_from_origin=100,
                                        peer_fallback="hash_mismatch: c1", bad_peers=("c1",)),
                           1.0)
    metrics.record_outcome(CacheOutcome(True, 100, "http", bytes_from_origin=100,
                                        peer_fallback="no_multihash"), 1.0)
    data = "fleetcache_compute_image_download_bytes_total"
    assert _value(registry, data, source="peer") == 160
    assert _value(registry, data, source="http") == 200
    assert _value(registry, "fleetcache_compute_image_downloads_total", source="peer") == 1
    fallbacks = "fleetcache_compute_peer_fallbacks_total"
    assert [_value(registry, fallbacks, reason=r)
            for r in ("no_multihash", "peer_failed", "hash_mismatch")] == [1, 0, 1]
    # RPC 1.6: refused bytes given back to the conductor still crossed the network.
    metrics.record_refused_peers(100, 20, exception.ImageChecksumMismatch(
        image_id="x", reason="sha512 mismatch"))
    assert _value(registry, data, source="peer") == 260
    assert _value(registry, data, source="http") == 220
    assert _value(registry, fallbacks, reason="hash_mismatch") == 2
    assert _value(registry, "fleetcache_compute_image_requests_total", result="error") == 1
    # RPC 1.7: an image given back after its peers failed, or only lacked it.
    metrics.record_peers_gone(30)
    metrics.record_peers_gone(0, "peer_absent")
    metrics.record_outcome(CacheOutcome(True, 100, "http", bytes_from_origin=100,
                                        peer_fallback="peer_absent: c2: HTTP 404"), 1.0)
    assert [_value(registry, fallbacks, reason=r)
            for r in ("peer_failed", "peer_absent")] == [1, 2]
    assert _value(registry, data, source="peer") == 290
    assert _value(registry, "fleetcache_compute_image_verification_failures_total",
                  check="checksum") == 1
    metrics.record_peer_request(401)
    metrics.record_peer_denied("bad_signature")
    metrics.record_peer_upload(0, 1)
    assert _value(registry, "fleetcache_compute_peer_uploads_in_flight") == 1
    metrics.record_peer_upload(4096, 0)
    assert _value(registry, "fleetcache_compute_peer_requests_total", code="401") == 1
    assert _value(registry, "fleetcache_compute_peer_denied_total", reason="bad_signature") == 1
    assert _value(registry, "fleetcache_compute_peer_upload_bytes_total") == 4096
    assert _value(registry, "fleetcache_compute_peer_uploads_in_flight") == 0
