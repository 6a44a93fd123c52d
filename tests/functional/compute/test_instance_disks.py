"""Instance disks over RPC (``fake://``): a compute with the disk driver and the local image
source, its conductor on SQLite; the disk, the backend, the backing chain, the cache report."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import uuid
from collections.abc import Iterator

import pytest

from fleetcache.common import exception
from tests.functional.compute.stack import CTXT, Stack
from tests.waiting import wait_for


@pytest.fixture
def stack(tmp_path: pathlib.Path) -> Iterator[Stack]:
    stack = Stack(tmp_path, **{"image_cache.manager_interval": -1})
    yield stack
    stack.stop()


def _chain(disk: str) -> list[dict[str, object]]:
    out = subprocess.run(["qemu-img", "info", "--output=json", "--backing-chain", "-U",
                          "-f", "qcow2", disk], check=True, capture_output=True, text=True)
    chain: list[dict[str, object]] = json.loads(out.stdout)
    return chain


def test_qcow2_overlay_on_the_cached_base(stack: Stack) -> None:
    image, instance = stack.add_qcow2(), str(uuid.uuid4())
    result = stack.api.create_instance_disk(CTXT, stack.host, instance, image, 32 * 2**20)
    disk = os.path.join(stack.compute_conf.instances_path, instance, "disk")
    assert result == {"instance_uuid": instance, "image_id": image, "backend": "qcow2",
                      "path": disk, "format": "qcow2", "base": str(stack.base(image)),
                      "image_fetched": True}
    chain = _chain(disk)
    assert [c["filename"] for c in chain] == [disk, str(stack.base(image))]
    # force_raw_images (default): the qcow2 image was cached as raw
    assert [c["format"] for c in chain] == ["qcow2", "raw"]
    assert chain[0]["virtual-size"] == 32 * 2**20
    assert wait_for(stack.reported_ids, "the cache report") == {image}


def test_flat_disk_then_delete(tmp_path: pathlib.Path) -> None:
    stack = Stack(tmp_path, **{"libvirt.images_type": "flat",
                               "image_cache.manager_interval": -1})
    try:
        image, instance = stack.add_raw(), str(uuid.uuid4())
        result = stack.api.create_instance_disk(CTXT, stack.host, instance, image)
        assert (result["backend"], result["format"]) == ("flat", "raw")
        assert pathlib.Path(result["path"]).read_bytes() == stack.base(image).read_bytes()
        assert stack.api.delete_instance_disk(CTXT, stack.host, instance) is True
        assert not os.path.exists(os.path.dirname(result["path"]))
        assert stack.api.delete_instance_disk(CTXT, stack.host, instance) is False
    finally:
        stack.stop()


def test_errors_come_back_as_themselves(stack: Stack) -> None:
    image, instance = stack.add_raw(), str(uuid.uuid4())
    with pytest.raises(exception.InvalidInput, match="is not a UUID"):
        stack.api.create_instance_disk(CTXT, stack.host, "../../etc", image)
    with pytest.raises(exception.ImageNotFound):
        stack.api.create_instance_disk(CTXT, stack.host, instance, str(uuid.uuid4()))
    stack.api.create_instance_disk(CTXT, stack.host, instance, image)
    with pytest.raises(exception.Conflict, match="already has a disk"):
        stack.api.create_instance_disk(CTXT, stack.host, instance, image)
