"""Which backend an image gets, whether its base must be converted, and what the node supports.

The rules (the table ``tests/unit/compute/test_imagebackend.py`` spells out):

* backend: the ``[libvirt] images_type_mapping`` entry for the image's ``disk_format``, else
  ``[libvirt] images_type``, where ``default`` is ``qcow2`` if ``[DEFAULT] use_cow_images``
  else ``flat`` (as Nova);
* the content format is the ``disk_format`` as qemu reads it (``iso``, ``ami``, ``aki``,
  ``ari`` are raw: ``fleetcache.common.disk_formats.content_format``);
* the cached base keeps the content format when it is raw, or when a mapping entry names a
  backend that holds that format as it is (``qcow2:qcow2``: the seed's "use the supplied image
  without converting", even with ``force_raw_images``); otherwise it is converted to raw once,
  with ``qemu-img convert``, when the backend cannot hold the format (``qcow2`` on ``flat``,
  ``lvm``, ``rbd``; ``vmdk`` anywhere) or ``[DEFAULT] force_raw_images`` is set (as Nova's
  ``fetch_to_raw``).
"""

from __future__ import annotations

import dataclasses
import shutil

from oslo_config import cfg

from fleetcache.common import disk_formats
from fleetcache.compute.imagebackend import backends, mapping
from fleetcache.image import qemu

#: Every image type a compute may report (os-traits ``COMPUTE_IMAGE_TYPE_*``): the Glance
#: disk formats.
IMAGE_TYPES = disk_formats.DISK_FORMATS


@dataclasses.dataclass(frozen=True)
class DiskPlan:
    """How one image becomes instance disks on this host.

    :ivar backend: the backend's name (``qcow2``, ``raw``, ``flat``, ``lvm``, ``rbd``, ``ploop``).
    :ivar mapped: whether ``images_type_mapping`` chose it (else ``images_type`` did).
    :ivar source_format: the image's content format.
    :ivar base_format: the format of the cached base image.
    :ivar convert_timeout: seconds the conversion to the base may take (``[libvirt]
        images_convert_timeout``), carried here so that publishing a base needs no config.
    """

    disk_format: str
    backend: str
    mapped: bool
    source_format: str
    base_format: str
    convert_timeout: int

    @property
    def convert(self) -> bool:
        """Whether the base is produced with ``qemu-img convert``."""
        return self.base_format != self.source_format


def default_backend(conf: cfg.ConfigOpts) -> str:
    """``[libvirt] images_type`` with ``default`` resolved as Nova does."""
    images_type = str(conf.libvirt.images_type)
    if images_type == "default":
        return "qcow2" if conf.use_cow_images else "flat"
    return images_type


def backends_in_use(conf: cfg.ConfigOpts) -> set[str]:
    """Every backend this host may make a disk with: the mapping's and ``images_type``'s.

    :raises InvalidConfiguration: when ``images_type_mapping`` is invalid.
    """
    entries = mapping.parse_images_type_mapping(conf.libvirt.images_type_mapping)
    return {default_backend(conf), *entries.values()}


def choose(conf: cfg.ConfigOpts, disk_format: str) -> DiskPlan:
    """The plan for an image of Glance ``disk_format``.

    :raises InvalidConfiguration: when ``images_type_mapping`` is invalid.
    """
    entries = mapping.parse_images_type_mapping(conf.libvirt.images_type_mapping)
    mapped = disk_format in entries
    backend = entries[disk_format] if mapped else default_backend(conf)
    source = disk_formats.content_format(disk_format)
    native = backends.BACKEND_CLASSES[backend].native_formats
    if source == "raw" or (mapped and source in native):
        base = source
    elif source not in native or conf.force_raw_images:
        base = "raw"
    else:
        base = source
    return DiskPlan(disk_format, backend, mapped, source, base,
                    convert_timeout=conf.libvirt.images_convert_timeout)


def supported_image_types(conf: cfg.ConfigOpts, which: backends.Which = shutil.which) -> set[str]:
    """Image types (Glance ``disk_format``) this node can turn into instance disks.

    Derived per format from the same plan the disks use. A type is supported when its images
    can pass format inspection (``ploop`` cannot: there is no inspector for it; ``vmdk`` not
    with an empty ``[compute] vmdk_allowed_types``; nothing but raw content without
    ``qemu-img``), the backend chosen for it can create disks in this release with the tools
    this host has, and it is not in ``[compute] image_type_exclude_list``.

    Nova's libvirt rule (qcow2 unless ``images_type`` is rbd/lvm without force_raw_images)
    exists because Nova does not convert for those backends then; here the plan converts
    whenever the backend needs it, so that rule reduces to "the chosen backend works".
    """
    excluded = set(conf.compute.image_type_exclude_list)
    has_qemu_img = which(qemu.QEMU_IMG) is not None
    supported = set()
    for image_type in IMAGE_TYPES:
        if image_type in excluded or image_type not in disk_formats.INSPECTABLE_FORMATS:
            continue
        if image_type == "vmdk" and not conf.compute.vmdk_allowed_types:
            continue
        if not has_qemu_img and image_type not in disk_formats.RAW_CONTENT_FORMATS:
            continue
        plan = choose(conf, image_type)
        backend = backends.get_backend(plan.backend, conf)
        if (backend.implemented and plan.base_format in backend.native_formats
                and not backend.missing_tools(which)):
            supported.add(image_type)
    return supported
