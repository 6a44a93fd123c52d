"""The rbd disk backend on the real stack: compute3 restarted with ``[libvirt]
images_type_mapping = raw:rbd, qcow2:rbd`` (pool ``instances``, user ``client.instances``),
driven through the compute RPC ``create_instance_disk``/``delete_instance_disk`` (there is no
servers API yet), checked with the ``rbd`` CLI as the admin user."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.common import config, exception, rpc
from fleetcache.common.context import get_admin_context
from fleetcache.compute import rpcapi
from fleetcache.compute.disk_record import DiskRecord, write_record
from tests.integration.stackops import file_gets, glance_image

pytestmark = pytest.mark.integration

HOST = "compute3"


@pytest.fixture
def rbd_host(stack: Any) -> Iterator[rpcapi.ComputeAPI]:
    """compute3 with the rbd backend, and a compute RPC client on its cell's broker."""
    options = (f"[libvirt]\nimages_type_mapping = raw:rbd, qcow2:rbd\n"
               f"images_rbd_pool = instances\nrbd_user = instances\n"
               f"images_rbd_ceph_conf = {stack.ceph.conf}\n")
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf(args=[], project="fleetcache",
         default_config_files=[str(stack.compute_conf_file(HOST))], default_config_dirs=[])
    transports = rpc.Transports(conf)
    try:
        with stack.compute_options(HOST, "rbd-disks", options):
            yield rpcapi.ComputeAPI(conf, transports.get())
    finally:
        transports.cleanup()


def _info(stack: Any, name: str) -> dict[str, Any] | None:
    proc = stack.ceph.rbd("admin", "info", "--format", "json", f"instances/{name}", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def test_raw_rbd_image_becomes_a_clone_and_delete_removes_it(stack, rbd_host):
    image_id, instance = stack.rbd_sample_image, str(uuid.uuid4())
    gets = len(file_gets(stack, image_id))
    result = rbd_host.create_instance_disk(get_admin_context(), HOST, instance, image_id)
    assert result["backend"] == "rbd" and result["image_fetched"] is False
    assert result["path"] == f"rbd:instances/{instance}_disk"
    assert result["base"] == f"rbd://{stack.ceph.fsid}/images/{image_id}/snap"
    info = _info(stack, f"{instance}_disk")
    assert info is not None, "no clone in pool instances"
    assert info["parent"]["pool"] == "images" and info["parent"]["image"] == image_id
    assert info["parent"]["snapshot"] == "snap"
    assert len(file_gets(stack, image_id)) == gets, "the clone downloaded the image"

    assert rbd_host.delete_instance_disk(get_admin_context(), HOST, instance) is True
    assert _info(stack, f"{instance}_disk") is None
    names = json.loads(stack.ceph.rbd("admin", "ls", "--format", "json", "instances").stdout)
    assert f"{instance}_disk" not in names


def test_qcow2_image_is_converted_and_imported(stack, rbd_host):
    image_id, instance = stack.sample_images[0], str(uuid.uuid4())  # qcow2, Glance's file store
    result = rbd_host.create_instance_disk(get_admin_context(), HOST, instance, image_id)
    try:
        assert (result["backend"], result["format"]) == ("rbd", "raw")
        info = _info(stack, f"{instance}_disk")
        assert info is not None and "parent" not in info
        glance = glance_image(stack, image_id)
        assert info["size"] == int(glance["virtual_size"])
    finally:
        assert rbd_host.delete_instance_disk(get_admin_context(), HOST, instance) is True
    assert _info(stack, f"{instance}_disk") is None


def _record_without_disk(stack: Any, instance: str, image_id: str) -> Path:
    """compute3's directory of ``instance`` as a create leaves it when the compute dies
    between writing ``disk.json`` and creating the image in Ceph."""
    directory = stack.computes[HOST] / instance
    directory.mkdir()
    write_record(str(directory), DiskRecord(
        image_id=image_id, backend="rbd", format="raw",
        base=str(stack.computes[HOST] / "_base" / "unmade"), base_format="raw"))
    return directory


def test_a_record_left_without_its_ceph_image_does_not_block_the_next_create(stack, rbd_host):
    image_id, instance = stack.sample_images[1], str(uuid.uuid4())  # raw, Glance's file store
    ctxt = get_admin_context()
    _record_without_disk(stack, instance, image_id)
    try:
        result = rbd_host.create_instance_disk(ctxt, HOST, instance, image_id)
        assert (result["backend"], result["path"]) == ("rbd", f"rbd:instances/{instance}_disk")
        assert _info(stack, f"{instance}_disk") is not None
    finally:
        rbd_host.delete_instance_disk(ctxt, HOST, instance)


def test_a_record_beside_its_ceph_image_keeps_the_image(stack, rbd_host):
    """An image under the disk's name (half imported, or complete with the reply lost) is a
    disk: the create conflicts and only the delete removes it."""
    image_id, instance = stack.sample_images[1], str(uuid.uuid4())
    ctxt = get_admin_context()
    stack.ceph.rbd("admin", "create", "--size", "4M", f"instances/{instance}_disk")
    directory = _record_without_disk(stack, instance, image_id)
    try:
        with pytest.raises(exception.Conflict, match="already has a disk"):
            rbd_host.create_instance_disk(ctxt, HOST, instance, image_id)
        assert _info(stack, f"{instance}_disk") is not None
        assert (directory / "disk.json").exists()
    finally:
        assert rbd_host.delete_instance_disk(ctxt, HOST, instance) is True
    assert _info(stack, f"{instance}_disk") is None
