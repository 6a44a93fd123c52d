"""The compute's ``cache_images`` over RPC (``fake://``) with the disk driver and a local
image source: states, bytes, files in ``_base``, touch on a repeat, errors per image.
"""

from __future__ import annotations

import io
import os
import pathlib
import time
import uuid
from collections.abc import Iterator

import pytest
from oslo_config import cfg

from fleetcache.common import rpc
from fleetcache.common.context import RequestContext
from fleetcache.compute import rpcapi
from fleetcache.compute.imagecache import cache_name
from fleetcache.compute.manager import ComputeManager
from fleetcache.compute.virt.driver import load_compute_driver
from fleetcache.image.local import add_image
from tests import hostile_images as corpus


@pytest.fixture
def compute(conf: cfg.ConfigOpts) -> Iterator[rpcapi.ComputeAPI]:
    driver = load_compute_driver(conf)
    driver.init_host(conf.host)
    transports = rpc.Transports(conf)
    transport = transports.get("fake:///")
    server = rpc.get_server(transport, rpcapi.TOPIC, conf.host, [ComputeManager(conf, driver)])
    server.start()
    try:
        yield rpcapi.ComputeAPI(conf, transport)
    finally:
        server.stop()
        server.wait()
        transports.cleanup()


def test_cache_images_over_rpc(conf: cfg.ConfigOpts, compute: rpcapi.ComputeAPI,
                               tmp_path: pathlib.Path) -> None:
    images = conf.image_source.local_directory
    raw = add_image(images, io.BytesIO(os.urandom(1024 * 1024)), disk_format="raw")
    small = add_image(images, str(corpus.qcow2(tmp_path)), disk_format="qcow2")
    missing = str(uuid.uuid4())
    ctxt = RequestContext(request_id="req-func")

    first = compute.cache_images(ctxt, conf.host, [raw.id, missing, small.id])
    assert list(first) == [raw.id, missing, small.id]
    assert first[raw.id] == {"state": "cached", "reason": None, "bytes_downloaded": 1024 * 1024,
                             "download_path": "http", "fallback_reason": None}
    assert first[small.id]["state"] == "cached"
    assert first[missing]["state"] == "error"
    assert f"Image {missing} could not be found" in str(first[missing]["reason"])

    base = pathlib.Path(conf.instances_path) / "_base"
    assert sorted(p.name for p in base.iterdir()) == sorted(
        [cache_name(raw.id), cache_name(small.id)])
    os.utime(base / cache_name(raw.id), (1_000_000, 1_000_000))

    second = compute.cache_images(ctxt, conf.host, [raw.id])
    assert second == {raw.id: {"state": "existing", "reason": None, "bytes_downloaded": 0,
                               "download_path": None, "fallback_reason": None}}
    assert (base / cache_name(raw.id)).stat().st_mtime > 1_000_000


def test_unsupported_driver_reports_unsupported(conf: cfg.ConfigOpts) -> None:
    conf.set_override("compute_driver", "fake")
    conf.set_override("unsupported", True, group="fake_driver")
    manager = ComputeManager(conf, load_compute_driver(conf))
    result = manager.cache_images(RequestContext(), ["img"])
    assert result["img"]["state"] == "unsupported"


def test_a_call_with_an_end_time_pauses_and_the_next_resumes_over_rpc(
        conf: cfg.ConfigOpts) -> None:
    """RPC 1.5: the paused image answers with what this call fetched; the next call (without
    terms) re-reads the kept bytes and fetches the rest only."""
    conf.set_override("download_chunk_size", 64 * 1024, group="glance")
    images = conf.image_source.local_directory
    size = 4 * 1024 * 1024
    data = os.urandom(size)
    image = add_image(images, io.BytesIO(data), disk_format="raw")
    other = add_image(images, io.BytesIO(os.urandom(1024 * 1024)), disk_format="raw")
    driver = load_compute_driver(conf)
    driver.init_host(conf.host)
    transports = rpc.Transports(conf)
    transport = transports.get("fake:///")
    server = rpc.get_server(transport, rpcapi.TOPIC, conf.host, [ComputeManager(conf, driver)])
    server.start()
    try:
        compute = rpcapi.ComputeAPI(conf, transport)
        ctxt = RequestContext(request_id="req-func-terms")
        started = time.monotonic()
        first = compute.cache_images(ctxt, conf.host, [image.id, other.id],
                                     until=time.time() + 0.5,
                                     bytes_per_second=2 * 1024 * 1024)
        assert time.monotonic() - started < 1.5
        assert first[image.id]["state"] == first[other.id]["state"] == "paused"
        kept = first[image.id]["bytes_downloaded"]
        assert 0 < kept < size and first[other.id]["bytes_downloaded"] == 0
        assert "paused at the call's end time" in str(first[image.id]["reason"])
        base = pathlib.Path(conf.instances_path) / "_base"
        assert [p.name for p in base.iterdir()] == [f".{cache_name(image.id)}.paused"]

        second = compute.cache_images(ctxt, conf.host, [image.id])
        assert second[image.id]["state"] == "cached"
        assert second[image.id]["bytes_resumed"] == kept
        assert second[image.id]["bytes_downloaded"] == size - kept
        assert (base / cache_name(image.id)).read_bytes() == data
        assert [p.name for p in base.iterdir()] == [cache_name(image.id)]
    finally:
        server.stop()
        server.wait()
        transports.cleanup()
