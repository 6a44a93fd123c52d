"""Direct downloads from Ceph on the real stack: the computes export images of Glance's rbd
store with ``rbd export`` through privsep (``[glance] allowed_direct_url_schemes = rbd``, user
``client.compute``, read-only), verify them like an HTTP download, and fall back to HTTP, with
the reason in the job's result, whenever the direct path fails.

Each test uploads its own raw image into Glance's rbd store (``X-Image-Meta-Store: ceph``), so
no compute has it cached, and drives the unmodified ``openstack aggregate cache image``; what
the job recorded is read from the stack's database, and whether Glance served the bytes from
its access log.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetcache.common.db import jobs
from fleetcache.compute.imagecache import PART_MARK
from tests.integration.stackops import cached_file, file_gets, glance_image

pytestmark = pytest.mark.integration

HOSTS = ("compute1", "compute2", "compute3")
MIB = 1024 * 1024


def _upload_rbd_image(stack: Any, data: bytes) -> str:
    """A new raw image in Glance's rbd store; :returns: its id (= its rbd image name)."""
    resp = stack.glance.post(f"{stack.glance_url}/v2/images", timeout=30, json={
        "name": f"it-rbd-{uuid.uuid4().hex[:8]}", "disk_format": "raw",
        "container_format": "bare", "visibility": "public"})
    resp.raise_for_status()
    image_id: str = resp.json()["id"]
    resp = stack.glance.put(f"{stack.glance_url}/v2/images/{image_id}/file", data=data, timeout=120,
                        headers={"Content-Type": "application/octet-stream",
                                 "X-Image-Meta-Store": stack.env["FLEETCACHE_GLANCE_RBD_STORE"]})
    resp.raise_for_status()
    body = glance_image(stack, image_id)
    assert body["status"] == "active", body
    assert body["direct_url"] == f"rbd://{stack.ceph.fsid}/images/{image_id}/snap", body
    return image_id


def _leftovers(stack: Any, host: str) -> list[str]:
    base = Path(stack.computes[host]) / "_base"
    return [n for n in os.listdir(base) if PART_MARK in n] if base.is_dir() else []


@pytest.fixture
def rbd_image(stack: Any) -> Iterator[tuple[str, bytes]]:
    data = os.urandom(24 * MIB + 4099)
    image_id = _upload_rbd_image(stack, data)
    yield image_id, data
    for host in HOSTS:
        cached_file(stack, host, image_id).unlink(missing_ok=True)
    stack.glance.delete(f"{stack.glance_url}/v2/images/{image_id}", timeout=60)


def _cache_and_wait(stack: Any, agg: dict[str, Any], image_id: str,
                    timeout: float = 180) -> dict[tuple[str, str], jobs.JobResultDict]:
    """``openstack aggregate cache image``, then the finished job's results by (host, image)."""
    known = {j["uuid"] for j in jobs.job_list(stack.db, aggregate_id=agg["id"])}
    stack.run_openstack("aggregate", "cache", "image", agg["name"], image_id)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = [j for j in jobs.job_list(stack.db, aggregate_id=agg["id"])
               if j["uuid"] not in known]
        if new and new[0]["state"] in (jobs.DONE, jobs.FAILED):
            job = jobs.job_get(stack.db, new[0]["uuid"])
            assert job["state"] == jobs.DONE, job
            return {(r["host"], r["image_id"]): r for r in job["results"]}
        time.sleep(0.5)
    raise AssertionError(f"no finished job on aggregate {agg['id']} after {timeout}s")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_cache_image_exports_from_ceph_on_every_compute(stack, make_aggregate, rbd_image):
    image_id, data = rbd_image
    agg = make_aggregate(hosts=HOSTS)
    results = _cache_and_wait(stack, agg, image_id)
    for host in HOSTS:
        result = results[(host, image_id)]
        assert (result["state"], result["download_path"], result["fallback_reason"]) == (
            "cached", "rbd", None), result
        assert result["bytes_downloaded"] == len(data)
        assert _sha256(cached_file(stack, host, image_id)) == hashlib.sha256(data).hexdigest()
        assert _leftovers(stack, host) == []
    # The jobs resource shows the path per host and image, as the job recorded it.
    path = f"os-aggregates/{agg['id']}/images/jobs"
    newest = stack.api_request("GET", path, microversion="2.81").json()["jobs"][0]
    shown = stack.api_request("GET", f"{path}/{newest['id']}", microversion="2.81").json()
    assert {(h["host"], i["download_path"], i["fallback_reason"])
            for h in shown["job"]["hosts"] for i in h["images"]} == {
        (host, "rbd", None) for host in HOSTS}
    assert len(file_gets(stack, image_id)) == 0, "Glance served the image's data"


def test_wrong_fsid_downloads_over_http_with_the_reason(stack, make_aggregate, rbd_image,
                                                         tmp_path):
    image_id, data = rbd_image
    other_fsid = str(uuid.uuid4())
    conf = stack.ceph.conf.read_text()
    other = tmp_path / "other-cluster.conf"
    other.write_text(re.sub(r"(?m)^(\s*fsid\s*=\s*).*$", rf"\g<1>{other_fsid}", conf))
    agg = make_aggregate(hosts=("compute1",))
    with stack.compute_options("compute1", "other-fsid",
                               f"[glance]\nrbd_ceph_conf = {other}\n"):
        results = _cache_and_wait(stack, agg, image_id)
    result = results[("compute1", image_id)]
    assert (result["state"], result["download_path"]) == ("cached", "http"), result
    assert "fsid mismatch" in (result["fallback_reason"] or "")
    assert stack.ceph.fsid in result["fallback_reason"] and other_fsid in result["fallback_reason"]
    assert cached_file(stack, "compute1", image_id).read_bytes() == data
    assert len(file_gets(stack, image_id)) == 1
    assert "direct download from Ceph not used" in stack.log_file("compute1").read_text()


def _ceph_admin(stack: Any, *args: str) -> str:
    cmd = ["ceph", "--conf", str(stack.ceph.conf), "--id", "admin",
           "--keyring", str(stack.ceph.keyrings["admin"]), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                          check=True).stdout


@pytest.fixture
def no_read_user(stack: Any, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Ceph user that may talk to the mons but has no OSD caps (cannot read images)."""
    name = f"it-noread-{uuid.uuid4().hex[:6]}"
    keyring = tmp_path / f"ceph.client.{name}.keyring"
    _ceph_admin(stack, "auth", "get-or-create", f"client.{name}", "mon", "profile rbd",
                "-o", str(keyring))
    yield name, keyring
    _ceph_admin(stack, "auth", "rm", f"client.{name}")


def test_keyring_without_read_caps_falls_back_with_permission_denied(
        stack, make_aggregate, rbd_image, no_read_user):
    image_id, data = rbd_image
    name, keyring = no_read_user
    agg = make_aggregate(hosts=("compute2",))
    with stack.compute_options("compute2", "no-read",
                               f"[glance]\nrbd_user = {name}\nrbd_keyring = {keyring}\n"):
        results = _cache_and_wait(stack, agg, image_id)
    result = results[("compute2", image_id)]
    assert (result["state"], result["download_path"]) == ("cached", "http"), result
    assert "permission denied" in (result["fallback_reason"] or ""), result
    assert cached_file(stack, "compute2", image_id).read_bytes() == data
    assert _leftovers(stack, "compute2") == []
    assert len(file_gets(stack, image_id)) == 1


def test_flipped_byte_in_ceph_is_a_hash_mismatch_and_nothing_is_cached(
        stack, make_aggregate, rbd_image):
    import rados  # Debian's bindings, linked into the venv (tools/ceph-bindings.sh)
    import rbd

    image_id, data = rbd_image
    offset = 5 * MIB + 17
    with rados.Rados(conffile=str(stack.ceph.conf), rados_id="admin",
                     conf={"keyring": str(stack.ceph.keyrings["admin"])}) as cluster, \
            cluster.open_ioctx("images") as ioctx, rbd.Image(ioctx, image_id) as image:
        # Glance's snapshot is what both paths read: replace it by one with the byte flipped.
        image.unprotect_snap("snap")
        image.remove_snap("snap")
        image.write(bytes([data[offset] ^ 0x01]), offset)
        image.create_snap("snap")
        image.protect_snap("snap")
    agg = make_aggregate(hosts=("compute3",))
    results = _cache_and_wait(stack, agg, image_id)
    result = results[("compute3", image_id)]
    assert result["state"] == "error", result
    assert "mismatch" in (result["reason"] or ""), result
    assert not cached_file(stack, "compute3", image_id).exists()
    assert _leftovers(stack, "compute3") == []
    log = stack.log_file("compute3").read_text()
    assert re.search(rf"Image {image_id}: direct download from Ceph not used.*mismatch", log)


def _osd_pid(stack: Any) -> int:
    return int((stack.ceph.conf.parent / "run" / "ceph-osd.0.pid").read_text().split()[0])


def test_osd_killed_mid_export_falls_back_to_http(stack, make_aggregate):
    """The OSD dies while a compute exports a larger image: the export fails (the OSD op
    timeout), the compute downloads from Glance, whose own reads of Ceph wait until the OSD is
    back, and the bytes are identical."""
    data = os.urandom(384 * MIB)
    image_id = _upload_rbd_image(stack, data)
    try:
        agg = make_aggregate(hosts=("compute1",))
        log = stack.log_file("compute1")
        mark = log.stat().st_size
        killer_done = threading.Event()

        def kill_when_exporting() -> None:
            try:
                deadline = time.monotonic() + 60
                part = Path(stack.computes["compute1"]) / "_base"
                while time.monotonic() < deadline:
                    parts = [p for p in part.iterdir() if PART_MARK in p.name] \
                        if part.is_dir() else []
                    if any(p.is_file() and p.stat().st_size > 16 * MIB for p in parts):
                        os.kill(_osd_pid(stack), signal.SIGKILL)
                        break
                    time.sleep(0.01)
                # Let the export fail on the dead OSD, then bring the OSD back for Glance.
                while time.monotonic() < deadline:
                    with log.open() as f:
                        f.seek(mark)
                        if "direct download from Ceph not used" in f.read():
                            break
                    time.sleep(0.2)
                _restart_osd(stack)
            finally:
                killer_done.set()

        killer = threading.Thread(target=kill_when_exporting, daemon=True)
        killer.start()
        results = _cache_and_wait(stack, agg, image_id, timeout=300)
        assert killer_done.wait(120)
        result = results[("compute1", image_id)]
        assert (result["state"], result["download_path"]) == ("cached", "http"), result
        assert result["fallback_reason"] and "rbd export" in result["fallback_reason"]
        assert hashlib.sha256(cached_file(stack, "compute1", image_id).read_bytes()).digest() == \
            hashlib.sha256(data).digest()
        assert _leftovers(stack, "compute1") == []
        assert len(file_gets(stack, image_id)) == 1
    finally:
        cached_file(stack, "compute1", image_id).unlink(missing_ok=True)
        if not _osd_alive(stack):
            _restart_osd(stack)
        _wait_osd_up(stack)
        stack.glance.delete(f"{stack.glance_url}/v2/images/{image_id}", timeout=60)


def _osd_alive(stack: Any) -> bool:
    try:
        os.kill(_osd_pid(stack), 0)
    except (OSError, ValueError):
        return False
    return True


def _restart_osd(stack: Any) -> None:
    """Start osd.0 again as ``tools/ceph.sh`` does (it forks; stdio to its start log)."""
    log = stack.ceph.conf.parent / "log" / "ceph-osd.0.start.log"
    with log.open("ab") as out:
        subprocess.run(["ceph-osd", "--conf", str(stack.ceph.conf), "-i", "0"], check=True,
                       timeout=60, stdin=subprocess.DEVNULL, stdout=out, stderr=out)


def _wait_osd_up(stack: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if '"up":1' in _ceph_admin(stack, "osd", "dump", "-f", "json").replace(" ", ""):
                return
        except subprocess.CalledProcessError:
            pass
        time.sleep(0.5)
    raise AssertionError("osd.0 is not up again")
