"""Instance disk backends and the per-image backend choice (``[libvirt] images_type_mapping``).

* :mod:`.mapping`: parser of ``images_type_mapping`` (seed 001 rules);
* :mod:`.selection`: :func:`choose` (backend and base format per image),
  :func:`supported_image_types` (what the node reports, later as traits) and
  :func:`backends_in_use`;
* :mod:`.backends`: qcow2, raw/flat, rbd (implemented), lvm, ploop (declared);
* :mod:`.disks`: :func:`prepare_base` (download -> cached base) and instance disk creation;
* :mod:`.rbd_disks`: the rbd backend's disks in Ceph (clone of Glance's snapshot, or import).
"""

from __future__ import annotations

from fleetcache.compute.imagebackend.backends import InstanceDisk, get_backend
from fleetcache.compute.imagebackend.disks import (
    create_instance_disk,
    delete_instance_disk,
    instance_dir,
    prepare_base,
)
from fleetcache.compute.imagebackend.mapping import parse_images_type_mapping
from fleetcache.compute.imagebackend.selection import (
    DiskPlan,
    backends_in_use,
    choose,
    default_backend,
    supported_image_types,
)

__all__ = [
    "DiskPlan",
    "InstanceDisk",
    "backends_in_use",
    "choose",
    "create_instance_disk",
    "default_backend",
    "delete_instance_disk",
    "get_backend",
    "instance_dir",
    "parse_images_type_mapping",
    "prepare_base",
    "supported_image_types",
]
