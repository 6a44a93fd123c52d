"""Turning an inspected download into a cached base, and a cached base into instance disks.

The download path calls :func:`prepare_base` after :func:`~fleetcache.image.format_safety.
inspect_image` accepted the temporary file; the driver calls :func:`create_instance_disk` and
:func:`delete_instance_disk`. Files appear under their final name only when complete (written
as ``<name>.part``, then renamed).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid

from oslo_config import cfg
from oslo_log import log as logging

from fleetcache.common import exception
from fleetcache.compute.imagebackend import backends
from fleetcache.compute.imagebackend.selection import DiskPlan
from fleetcache.image import qemu

LOG = logging.getLogger(__name__)


def instance_dir(conf: cfg.ConfigOpts, instance_uuid: str) -> str:
    """``<instances_path>/<uuid>``; ``instance_uuid`` must be a UUID (no path tricks)."""
    try:
        canonical = str(uuid.UUID(instance_uuid))
    except (ValueError, TypeError, AttributeError):
        raise exception.InvalidInput(reason=f"{instance_uuid!r} is not a UUID") from None
    return os.path.join(os.path.abspath(conf.instances_path), canonical)


def prepare_base(plan: DiskPlan, downloaded: str, base: str) -> None:
    """Move an inspected download to ``base``, converting it to raw when the plan says so.

    ``downloaded`` is consumed (renamed or removed). The conversion is written next to it, as
    ``<downloaded>.converted`` (so a hidden ``.<sha1>.part-XXXX`` download name stays a
    partial file for the image cache), fsynced (qemu-img does not flush its output) and
    renamed: a failed conversion or a crash leaves no ``base`` with partial data.

    :raises QemuImgError: when the conversion fails.
    """
    if not plan.convert:
        os.replace(downloaded, base)
        return
    staged = f"{downloaded}.converted"
    try:
        qemu.convert(downloaded, plan.source_format, staged, plan.base_format)
        fd = os.open(staged, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(staged, base)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(downloaded)
    LOG.info("Converted %s from %s to %s", base, plan.source_format, plan.base_format)


def create_instance_disk(
    conf: cfg.ConfigOpts, plan: DiskPlan, instance_uuid: str, base: str, size: int | None = None
) -> backends.InstanceDisk:
    """Create ``<instances_path>/<uuid>/disk`` from the cached ``base`` with the plan's backend.

    :raises NotImplementedError: for a backend not implemented in this release.
    :raises InvalidInput: for a bad UUID or a size below the image's virtual size.
    :raises Conflict: when the instance already has a disk.
    """
    backend = backends.get_backend(plan.backend, conf)
    directory = instance_dir(conf, instance_uuid)
    disk = os.path.join(directory, "disk")
    if os.path.exists(disk):
        raise exception.Conflict(reason=f"instance {instance_uuid} already has a disk")
    os.makedirs(directory, exist_ok=True)
    partial = f"{disk}.part"
    try:
        disk_format = backend.create_disk(base, plan.base_format, partial, size)
        os.replace(partial, disk)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
    LOG.info("Created %s disk %s from %s", backend.name, disk, base)
    return backends.InstanceDisk(backend=backend.name, path=disk, format=disk_format)


def delete_instance_disk(conf: cfg.ConfigOpts, instance_uuid: str) -> bool:
    """Remove the instance's directory; returns whether there was one."""
    directory = instance_dir(conf, instance_uuid)
    if not os.path.isdir(directory):
        return False
    shutil.rmtree(directory)
    return True
