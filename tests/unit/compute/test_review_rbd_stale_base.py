"""Review finding in fleetcache.compute.instance_disks: a host whose cache holds a qcow2 base
(cached while its backend kept qcow2 as it is) and whose operator then maps qcow2 images to
the rbd backend (moving instance disks to Ceph) can never make a disk of that image: every
boot fails with InstanceDisksNotSupported, while the host keeps reporting qcow2 as supported
(COMPUTE_IMAGE_TYPE_QCOW2) and every failed attempt touches the base, so it never ages out."""

from __future__ import annotations

import pathlib
import uuid

from fleetcache.compute.imagebackend import supported_image_types
from fleetcache.compute.imagecache import cache_name
from fleetcache.compute.instance_disks import InstanceDisks
from tests.unit.compute.diskfixtures import CTXT
from tests.unit.compute.test_rbd_disks import FakeRbd, _host


def test_a_qcow2_base_cached_before_the_move_to_rbd_still_makes_disks(
        tmp_path: pathlib.Path) -> None:
    host, rbd = _host(tmp_path, force_raw_images=False)
    # Before: qcow2 images stay qcow2 (mapping qcow2:qcow2), as the seed allows.
    host.conf.set_override("images_type_mapping", ["qcow2:qcow2"], group="libvirt")
    image = host.add_qcow2()
    host.disks.create(CTXT, str(uuid.uuid4()), image)
    assert host.index.get(cache_name(image))["base_format"] == "qcow2"  # type: ignore[index]
    # After: the operator maps qcow2 to rbd (the check at start-up accepts it) and restarts.
    host.conf.set_override("images_type_mapping", ["raw:rbd", "qcow2:rbd"], group="libvirt")
    host.conf.set_override("force_raw_images", True)
    assert "qcow2" in supported_image_types(host.conf)  # what the scheduler is told
    host.disks = InstanceDisks(host.conf, host.cache, FakeRbd(host.conf))
    instance = str(uuid.uuid4())
    result = host.disks.create(CTXT, instance, image)  # InstanceDisksNotSupported today
    assert result["backend"] == "rbd"
