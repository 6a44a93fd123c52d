"""The names of image (disk) formats and of disk backends: the one list of each.

Every room names them: the ``[libvirt]`` options offer the backends as choices (so they live
here, in ``common``, the room the configuration is defined in), the image room inspects the
formats and hands them to ``qemu-img``, and the compute maps formats to backends and reports
the formats it supports. Each subset below is derived from :data:`DISK_FORMATS`, so a format
added there is known everywhere, and where it must not go (no inspector, not raw content) is
written once, here.
"""

from __future__ import annotations

#: Every Glance ``disk_format`` fleetcache knows: Glance's default ``[image_format]
#: disk_formats`` (the image types a compute reports, os-traits ``COMPUTE_IMAGE_TYPE_*``, and
#: the source formats ``[libvirt] images_type_mapping`` may map). In the order messages list them.
DISK_FORMATS: tuple[str, ...] = (
    "raw", "qcow2", "vmdk", "vdi", "vhd", "vhdx", "iso", "ploop", "ami", "aki", "ari",
)

#: Amazon machine, kernel and ramdisk images: to Glance a ``disk_format``, to qemu plain raw
#: bytes, and the format inspector must find nothing but raw in them.
AMI_FORMATS: tuple[str, ...] = ("ami", "aki", "ari")

#: Disk formats whose bytes qemu reads as ``raw``: raw itself, an ISO 9660 image (its own
#: structure is for the guest, not for qemu) and the Amazon formats.
RAW_CONTENT_FORMATS: tuple[str, ...] = ("raw", "iso", *AMI_FORMATS)

#: Disk formats that can be inspected before use, and so the only ones ever accepted and
#: handed to ``qemu-img``: all but ``ploop``, for which oslo.utils' ``format_inspector`` has
#: no inspector (Nova's ``do_image_deep_inspection`` refuses such a format too).
INSPECTABLE_FORMATS: tuple[str, ...] = tuple(f for f in DISK_FORMATS if f != "ploop")

#: Disk backends (``[libvirt] images_type`` values but ``default``, and the right-hand side of
#: ``images_type_mapping`` entries): each names a class in
#: ``fleetcache.compute.imagebackend.backends``. ``raw`` and ``flat`` are the same sparse copy
#: (Nova's two names for it); ``qcow2`` and ``ploop`` are disk formats too.
DISK_BACKENDS: tuple[str, ...] = ("raw", "flat", "qcow2", "lvm", "rbd", "ploop")

#: ``[libvirt] images_type`` choices: a backend, or ``default`` (qcow2 when ``[DEFAULT]
#: use_cow_images`` is true, else flat, as Nova).
IMAGES_TYPE_CHOICES: tuple[str, ...] = (*DISK_BACKENDS, "default")


def content_format(disk_format: str) -> str:
    """The format qemu reads an image of Glance ``disk_format`` as (``raw`` for iso, ami, ...)."""
    return "raw" if disk_format in RAW_CONTENT_FORMATS else disk_format
