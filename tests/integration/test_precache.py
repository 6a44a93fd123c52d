"""Pre-caching on the real local stack: the unmodified ``openstack aggregate cache image``, real
Glance, three computes in two cells on RabbitMQ, one of them stopped.

What the job resource says is checked against the computes' ``_base`` directories, against
Glance's own hashes, and against the ``aggregate.cache_images.*`` notifications read from
RabbitMQ.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import oslo_messaging as messaging
import pytest
from oslo_config import cfg

from fleetcache.common import rpc
from fleetcache.common.db import jobs
from fleetcache.compute.imagecache import PART_MARK
from tests.integration.stackops import MV, cached_file, file_sha512, glance_image, partial_files

pytestmark = pytest.mark.integration

HOSTS = ("compute1", "compute2", "compute3")
LIVE = ("compute1", "compute3")  # one in each cell: both cell transports carry a download
STOPPED = "compute2"


class Notifications:
    """Reads topic ``notifications`` on the conductor's broker (draining the shared queue)."""

    def __init__(self, transport_url: str) -> None:
        self.seen: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        conf = cfg.ConfigOpts()
        conf([], project="fleetcache-it", default_config_files=[], default_config_dirs=[])
        self.transports = rpc.Transports(conf)
        transport = self.transports.notification(transport_url)
        self.listener = messaging.get_notification_listener(
            transport, [messaging.Target(topic="notifications")], [self])

    def info(self, ctxt: Any, publisher_id: str, event_type: str, payload: Any,
             metadata: Any) -> None:
        with self._lock:
            self.seen.append((publisher_id, event_type, payload))

    def for_job(self, job_id: str, count: int, timeout: float = 20) -> list[tuple[str, dict]]:
        deadline = time.monotonic() + timeout
        mine: list[tuple[str, dict[str, Any]]] = []
        while time.monotonic() < deadline:
            with self._lock:
                mine = [(e, p) for _, e, p in self.seen
                        if isinstance(p, dict) and p.get("job_uuid") == job_id]
            if len(mine) >= count:
                return mine
            time.sleep(0.1)
        raise AssertionError(f"{len(mine)} notifications for job {job_id} on RabbitMQ, "
                             f"wanted {count}: is [oslo_messaging_notifications] driver set?")


@pytest.fixture
def notifications(stack: Any) -> Any:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(stack.conf_file)
    listener = Notifications(parser["DEFAULT"]["transport_url"])
    listener.listener.start()
    yield listener
    listener.listener.stop()
    listener.listener.wait()
    listener.transports.cleanup()


def _glance_sha512(stack: Any, image_id: str) -> str:
    """Glance's hash of the image's bytes, checked to be a SHA-512 (what the tests compute)."""
    body = glance_image(stack, image_id)
    assert body["os_hash_algo"] == "sha512"
    return str(body["os_hash_value"])


def _same_disk_as_glance(stack: Any, image_id: str, cached: Path, tmp: Path) -> bool:
    """Byte-identical to Glance's bytes, or, when the compute converted the image to raw
    (``force_raw_images``), the same disk contents according to ``qemu-img compare``."""
    if file_sha512(cached) == _glance_sha512(stack, image_id):
        return True
    body = glance_image(stack, image_id)
    with cached.open("rb") as f:
        assert f.read(4) != b"QFI\xfb", "a cached qcow2 must be Glance's bytes"
    original = tmp / f"{image_id}.{body['disk_format']}"
    with stack.glance.get(f"{stack.glance_url}/v2/images/{image_id}/file", stream=True,
                      timeout=60) as resp, original.open("wb") as out:
        resp.raise_for_status()
        for chunk in resp.iter_content(1 << 20):
            out.write(chunk)
    proc = subprocess.run(["qemu-img", "compare", "-q", "-f", body["disk_format"], "-F", "raw",
                           str(original), str(cached)], capture_output=True, check=False)
    return proc.returncode == 0


def _jobs(stack: Any, agg_id: int) -> list[dict[str, Any]]:
    resp = stack.api_request("GET", f"os-aggregates/{agg_id}/images/jobs", microversion=MV)
    resp.raise_for_status()
    return list(resp.json()["jobs"])


def _wait_new_job(stack: Any, agg_id: int, known: set[str], timeout: float = 120) -> dict:
    """The one job of the aggregate not in ``known``, once it is done or failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = [j for j in _jobs(stack, agg_id) if j["id"] not in known]
        if new and new[0]["state"] in ("done", "failed"):
            assert len(new) == 1, new
            resp = stack.api_request("GET", f"os-aggregates/{agg_id}/images/jobs/{new[0]['id']}",
                                     microversion=MV)
            resp.raise_for_status()
            return dict(resp.json()["job"])
        time.sleep(0.5)
    raise AssertionError(f"no finished new job on aggregate {agg_id} after {timeout}s")


def _states(job: dict[str, Any]) -> dict[str, dict[str, tuple[str, str | None]]]:
    return {h["host"]: {i["image_id"]: (i["state"], i["reason"]) for i in h["images"]}
            for h in job["hosts"]}


def _check_disks_agree(stack: Any, job: dict[str, Any]) -> None:
    """Every image the job calls cached or existing is in that host's ``_base``, complete."""
    for host, images in _states(job).items():
        base = Path(stack.computes[host]) / "_base"
        if base.is_dir():
            assert [n for n in os.listdir(base) if PART_MARK in n] == [], host
        for image_id, (state, _reason) in images.items():
            present = cached_file(stack, host, image_id).is_file()
            assert present == (state in ("cached", "existing")), (host, image_id, state)


def test_openstack_cache_image_fills_live_computes_skips_stopped_and_renews(
        stack, make_aggregate, notifications, tmp_path):
    images = list(stack.sample_images)
    for host in HOSTS:
        stack.wait_service_state(host, up=True)
    agg = make_aggregate(hosts=HOSTS)
    for host in HOSTS:  # start from empty caches so the first request must download
        for image_id in images:
            cached_file(stack, host, image_id).unlink(missing_ok=True)

    with stack.compute_stopped(STOPPED):
        stack.wait_service_state(STOPPED, up=False)
        proc = stack.run_openstack("aggregate", "cache", "image", agg["name"], *images)
        assert proc.returncode == 0
        job = _wait_new_job(stack, agg["id"], set())

        assert job["state"] == "done" and job["total_hosts"] == 3
        states = _states(job)
        for host in LIVE:
            assert states[host] == {i: ("cached", None) for i in images}
        assert states[STOPPED] == {i: ("skipped", "down") for i in images}
        by_host = {h["host"]: h for h in job["hosts"]}
        for image_id in images:
            copies = {file_sha512(cached_file(stack, host, image_id)) for host in LIVE}
            assert len(copies) == 1, f"the live computes hold different copies of {image_id}"
            assert _same_disk_as_glance(stack, image_id, cached_file(stack, LIVE[0], image_id),
                                        tmp_path)
            assert not cached_file(stack, STOPPED, image_id).exists()
        glance_bytes = sum(int(glance_image(stack, i)["size"]) for i in images)
        for host in LIVE:
            assert by_host[host]["bytes_downloaded"] == glance_bytes
        _check_disks_agree(stack, job)

        events = notifications.for_job(job["id"], 2 + len(HOSTS))
        assert events[0][0] == "aggregate.cache_images.start"
        assert events[-1][0] == "aggregate.cache_images.end"
        progress = {p["host"]: p for e, p in events if e == "aggregate.cache_images.progress"}
        assert sorted(p["index"] for p in progress.values()) == [1, 2, 3]
        assert {p["total"] for p in progress.values()} == {3}
        for host in LIVE:
            assert sorted(progress[host]["images_cached"]) == sorted(images)
        assert sorted(progress[STOPPED]["images_failed"]) == sorted(images)

        old = time.time() - 3600
        for host in LIVE:
            for image_id in images:
                os.utime(cached_file(stack, host, image_id), (old, old))
        stack.run_openstack("aggregate", "cache", "image", agg["name"], *images)
        again = _wait_new_job(stack, agg["id"], {job["id"]})

    states = _states(again)
    for host in LIVE:
        assert states[host] == {i: ("existing", None) for i in images}
        for image_id in images:
            assert cached_file(stack, host, image_id).stat().st_mtime > old + 3000  # lease renewed
    assert states[STOPPED] == {i: ("skipped", "down") for i in images}
    assert again["counts"]["existing"] == 2 * len(images)
    assert again["bytes_downloaded"] == 0
    _check_disks_agree(stack, again)


def test_missing_image_is_400_and_leaves_no_job(stack, make_aggregate):
    agg = make_aggregate(hosts=LIVE)
    body = {"cache": [{"id": stack.sample_images[0]}, {"id": str(uuid.uuid4())}]}
    resp = stack.api_request("POST", f"os-aggregates/{agg['id']}/images", microversion=MV,
                             json=body)
    assert resp.status_code == 400, resp.text
    assert "could not be found" in resp.text
    assert _jobs(stack, agg["id"]) == []
    assert jobs.job_list(stack.db, aggregate_id=agg["id"]) == []


def test_fleetcache_cli_waits_and_prints_the_table(stack, make_aggregate):
    agg = make_aggregate(hosts=LIVE)
    cli = Path(os.environ.get("FLEETCACHE_VENV", Path(__file__).parents[2] / ".venv"))
    proc = subprocess.run(
        [str(cli / "bin" / "fleetcache"), "cache-images", agg["name"], *stack.sample_images,
         "--wait", "--timeout", "120"],
        env=stack.process_env(), capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2/2 hosts  done" in proc.stderr
    for host in LIVE:
        row = [line for line in proc.stdout.splitlines() if line.startswith(f"| {host} ")]
        assert len(row) == 1
        assert {c.strip() for c in row[0].split("|")[2:-2]} <= {"cached", "existing"}, row[0]
    assert f"on aggregate {agg['id']}: done in" in proc.stdout


BIG_MIB = 1024  # ~7 s to download here: a wide window to kill the compute in


@pytest.fixture
def big_image(stack: Any) -> Any:
    """A 1 GiB raw image in the stack's Glance, deleted after the test."""
    resp = stack.glance.post(f"{stack.glance_url}/v2/images", timeout=30, json={
        "name": f"it-big-{uuid.uuid4().hex[:8]}", "disk_format": "raw",
        "container_format": "bare"})
    resp.raise_for_status()
    image_id = resp.json()["id"]
    block = os.urandom(1 << 20)
    try:
        stack.glance.put(f"{stack.glance_url}/v2/images/{image_id}/file",
                     data=(block for _ in range(BIG_MIB)), timeout=600,
                     headers={"Content-Type": "application/octet-stream"}).raise_for_status()
        yield image_id
    finally:
        stack.glance.delete(f"{stack.glance_url}/v2/images/{image_id}", timeout=30)


def _call_monitor_timeout(stack: Any) -> int:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(stack.conf_file)
    return int(parser["DEFAULT"].get("rpc_response_timeout", "60"))


def test_compute_killed_mid_download_is_error_in_time_and_next_request_caches(
        stack, make_aggregate, big_image):
    victim, other = "compute1", "compute2"
    agg = make_aggregate(hosts=(victim, other))
    for host in (victim, other):
        cached_file(stack, host, big_image).unlink(missing_ok=True)
    body = {"cache": [{"id": big_image}]}
    resp = stack.api_request("POST", f"os-aggregates/{agg['id']}/images", microversion=MV,
                             json=body)
    assert resp.status_code == 202, resp.text
    job_id = resp.headers["Location"].rsplit("/", 1)[-1]
    job_path = f"os-aggregates/{agg['id']}/images/jobs/{job_id}"

    deadline = time.monotonic() + 60
    while not any(p.stat().st_size > 0 for p in partial_files(stack, victim, big_image)):
        assert time.monotonic() < deadline, "the download never started on the victim"
        time.sleep(0.02)
    with stack.compute_stopped(victim):  # SIGKILL in the middle of the download
        killed = time.monotonic()
        limit = _call_monitor_timeout(stack) + 30
        while True:
            job = stack.api_request("GET", job_path, microversion=MV).json()["job"]
            states = _states(job)
            if victim in states:
                break
            assert time.monotonic() - killed < limit, f"no result for {victim} after {limit}s"
            time.sleep(0.5)
        assert states[victim][big_image][0] == "error"
        assert states[victim][big_image][1].startswith("MessagingTimeout")
        assert not cached_file(stack, victim, big_image).exists()  # nothing under the final name
        job = _wait_new_job(stack, agg["id"], set(), timeout=300)
        assert job["id"] == job_id and job["state"] == "done"
        assert _states(job)[other][big_image] == ("cached", None)

    resp = stack.api_request("POST", f"os-aggregates/{agg['id']}/images", microversion=MV,
                             json=body)
    assert resp.status_code == 202, resp.text
    again = _wait_new_job(stack, agg["id"], {job_id})
    assert _states(again)[victim][big_image] == ("cached", None)
    assert file_sha512(cached_file(stack, victim, big_image)) == _glance_sha512(stack, big_image)
    assert partial_files(stack, victim, big_image) == []
    for host in (victim, other):
        cached_file(stack, host, big_image).unlink(missing_ok=True)
