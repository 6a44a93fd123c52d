"""Instance disks and cache ageing with real processes on the machine's RabbitMQ (vhost
``/fctest_instance_disks``): a ``fleetcache-compute`` with the disk driver and a local image
source, a ``fleetcache-conductor`` on SQLite, and this test as the RPC client."""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetcache.common import rpc
from fleetcache.common.context import RequestContext
from fleetcache.compute import rpcapi
from fleetcache.compute.imagecache import cache_name
from fleetcache.demo import make_conf
from fleetcache.image import local
from tests.integration.daemons import Deployment, private_vhost
from tests.stored_reports import stored_report
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

VHOST = "/fctest_instance_disks"
URL = f"rabbit://guest:guest@127.0.0.1:5672/{VHOST}"
HOST = "fctest-disk1"
MAX_AGE = 2


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    with private_vhost(VHOST):
        yield VHOST


@pytest.fixture
def deployment(vhost: str, tmp_path: Path) -> Iterator[Deployment]:
    extra = "\n".join([
        "[DEFAULT]", "compute_driver = disk",
        "[image_source]", "backend = local", f"local_directory = {tmp_path}/images",
        "[image_cache]", "manager_interval = 1",
        f"remove_unused_original_minimum_age_seconds = {MAX_AGE}", "",
    ])
    dep = Deployment(tmp_path, URL, extra=extra)
    yield dep
    dep.close()


def _reported(dep: Deployment) -> set[str] | None:
    cache = stored_report(dep.db, HOST)
    return {i["image_id"] for i in cache["images"]} if cache else None


def test_disk_from_the_cache_and_ageing_over_rabbitmq(deployment: Deployment,
                                                       tmp_path: Path) -> None:
    conductor = deployment.start_conductor()
    compute = deployment.start_compute(HOST)
    wait_for(lambda: deployment.is_up(HOST), "compute up", 30, guard=deployment.check_running)
    images = str(tmp_path / "images")
    kept, unused = (local.add_image(images, io.BytesIO(os.urandom(1 << 20)), disk_format="raw").id
                    for _ in range(2))
    conf = make_conf(str(tmp_path), "fctest-client", transport_url=URL, long_rpc_timeout=60)
    transports = rpc.Transports(conf)
    api = rpcapi.ComputeAPI(conf, transports.get())
    ctxt = RequestContext(request_id="req-integration")
    try:
        instance = str(uuid.uuid4())
        result = api.create_instance_disk(ctxt, HOST, instance, kept)
        assert result["backend"] == "qcow2" and result["image_fetched"] is True
        info = json.loads(subprocess.run(
            ["qemu-img", "info", "--output=json", "-U", "-f", "qcow2", result["path"]],
            check=True, capture_output=True, text=True).stdout)
        assert info["full-backing-filename"] == result["base"]
        assert api.cache_images(ctxt, HOST, [unused])[unused]["state"] == "cached"
        wait_for(lambda: _reported(deployment) == {kept, unused}, "the cache report", 20,
                 guard=deployment.check_running)

        base_dir = tmp_path / "instances" / "_base"
        for image in (kept, unused):
            when = time.time() - MAX_AGE - 5
            os.utime(base_dir / cache_name(image), (when, when))
        wait_for(lambda: not (base_dir / cache_name(unused)).exists(),
                 "the periodic pass to remove the unused image", 20,
                 guard=deployment.check_running)
        assert (base_dir / cache_name(kept)).exists()  # it backs the instance's disk
        wait_for(lambda: _reported(deployment) == {kept}, "the report after the pass", 20,
                 guard=deployment.check_running)
        assert "freeing" in compute.log(200)

        assert api.delete_instance_disk(ctxt, HOST, instance) is True
        wait_for(lambda: not (base_dir / cache_name(kept)).exists(),
                 "the base of the deleted disk to age out", 20, guard=deployment.check_running)
    finally:
        transports.cleanup()
    assert compute.terminate() == 0
    assert conductor.terminate() == 0
