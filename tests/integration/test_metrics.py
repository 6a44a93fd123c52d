"""The Prometheus exporters of the conductor and the three computes, scraped on the real stack
before and after one pre-cache job.

The job caches three new images on every compute: a raw image in Glance's file store (over
HTTP), a raw image in its rbd store (exported from Ceph directly) and a qcow2 declared raw
(refused by format inspection). Each exporter's counters must have moved by exactly what the
job did, as the job resource and the computes' disks show it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from fleetcache.common.db import jobs
from tests import hostile_images
from tests.integration.stackops import MV, cached_file, wait_job_done
from tests.integration.test_rbd_download import _upload_rbd_image
from tests.integration.test_status_page import upload_image

pytestmark = pytest.mark.integration

HOSTS = ("compute1", "compute2", "compute3")
MIB = 1 << 20

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    """Every sample an exporter serves, by name and labels."""
    resp = requests.get(url, timeout=10)
    resp.raise_for_status()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(resp.text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def new_images(stack: Any, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Three images no compute holds: ``http`` (file store), ``rbd`` and ``bad``."""
    raw = tmp_path / "disk.raw"
    raw.write_bytes(os.urandom(3 * MIB))
    images = {
        "http": upload_image(stack, raw, "raw"),
        "rbd": _upload_rbd_image(stack, os.urandom(2 * MIB)),
        "bad": upload_image(stack, hostile_images.qcow2(tmp_path, size="1M"), "raw"),
    }
    yield images
    for image_id in images.values():
        stack.glance.delete(f"{stack.glance_url}/v2/images/{image_id}", timeout=30)
        for host in HOSTS:
            cached_file(stack, host, image_id).unlink(missing_ok=True)


def test_exporters_count_what_a_pre_cache_job_did(
        stack: Any, make_aggregate: Any, new_images: dict[str, str]) -> None:
    conductor_url = stack.env["FLEETCACHE_METRICS_CONDUCTOR"]
    compute_urls = dict(e.split("=", 1) for e in stack.env["FLEETCACHE_METRICS_COMPUTES"].split())
    assert sorted(compute_urls) == sorted(HOSTS)
    for host in HOSTS:  # an earlier test may have stopped and restarted one
        stack.wait_service_state(host, up=True)
    before = {"conductor": scrape(conductor_url)} | {h: scrape(u) for h, u in compute_urls.items()}

    aggregate = make_aggregate(hosts=HOSTS)
    resp = stack.api_request("POST", f"os-aggregates/{aggregate['id']}/images", microversion=MV,
                             json={"cache": [{"id": i} for i in new_images.values()]})
    assert resp.status_code == 202, resp.text
    job = wait_job_done(stack, aggregate["id"], resp.headers["Location"].rsplit("/", 1)[-1])
    assert job["state"] == "done"
    assert job["counts"]["cached"] == 6 and job["counts"]["error"] == 3, job["counts"]
    paths = {(r["host"], r["image_id"]): r["download_path"]
             for r in jobs.job_get(stack.db, job["id"])["results"]}

    after = scrape(conductor_url)
    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before["conductor"], name, **labels)

    assert delta("fleetcache_conductor_image_results_total", state="cached") == 6
    assert delta("fleetcache_conductor_image_results_total", state="error") == 3
    rbd_hosts = sum(1 for h in HOSTS if paths[(h, new_images["rbd"])] == "rbd")
    assert rbd_hosts == 3, paths  # the stack's computes all read the stack's Ceph
    assert delta("fleetcache_conductor_image_downloads_total", source="rbd") == 3
    assert delta("fleetcache_conductor_image_downloads_total", source="http") == 3
    assert delta("fleetcache_conductor_image_download_bytes_total", source="http") == 9 * MIB
    assert value(after, "fleetcache_conductor_host_calls_in_flight") == 0
    assert value(after, "fleetcache_jobs", state="done") >= 1
    assert value(after, "fleetcache_jobs", state="running") == 0

    for host, url in compute_urls.items():
        now, then = scrape(url), before[host]

        def moved(name: str, **labels: str) -> float:
            return value(now, name, **labels) - value(then, name, **labels)  # noqa: B023

        assert moved("fleetcache_compute_image_downloads_total", source="http") == 1, host
        assert moved("fleetcache_compute_image_downloads_total", source="rbd") == 1, host
        assert moved("fleetcache_compute_image_download_bytes_total", source="http") == 3 * MIB
        assert moved("fleetcache_compute_image_download_bytes_total", source="rbd") == 2 * MIB
        assert moved("fleetcache_compute_image_download_seconds_count", source="rbd") == 1
        assert moved("fleetcache_compute_image_requests_total", result="cached") == 2
        assert moved("fleetcache_compute_image_verification_failures_total",
                     check="format") == 1, host
        assert moved("fleetcache_compute_image_download_fallbacks_total") == 0
        on_disk = sorted(p for p in (Path(stack.computes[host]) / "_base").iterdir()
                         if p.is_file() and not p.name.startswith("."))
        assert value(now, "fleetcache_compute_image_cache_entries") == len(on_disk), host
        assert value(now, "fleetcache_compute_image_cache_bytes") == sum(
            p.stat().st_blocks * 512 for p in on_disk)
    assert uuid.UUID(job["id"])
