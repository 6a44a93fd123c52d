"""Turning an inspected download into a cached base, and a cached base into instance disks.

The download path calls :func:`prepare_base` after :func:`~fleetcache.image.format_safety.
inspect_image` accepted the temporary file; the driver calls :func:`create_instance_disk` and
:func:`delete_instance_disk`. Files appear under their final name only when complete (written
as ``<name>.part``, then renamed).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
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

_DIRECT_IO_BLOCK = 4096
#: ``qemu-img convert -W`` for bases: the staged file is read by no one until its rename.
OUT_OF_ORDER = True


def instance_dir(conf: cfg.ConfigOpts, instance_uuid: str) -> str:
    """``<instances_path>/<uuid>``; ``instance_uuid`` must be a UUID (no path tricks)."""
    try:
        canonical = str(uuid.UUID(instance_uuid))
    except (ValueError, TypeError, AttributeError):
        raise exception.InvalidInput(reason=f"{instance_uuid!r} is not a UUID") from None
    return os.path.join(os.path.abspath(conf.instances_path), canonical)


def supports_direct_io(path: str) -> bool:
    """Whether ``path``'s file system takes O_DIRECT writes (Nova's ``supports_direct_io``).

    Creates ``path`` (which must not exist) and writes one aligned 4 KiB block to it with
    O_DIRECT; the file is left for the caller to overwrite or remove.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o644)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        raise
    try:
        with mmap.mmap(-1, _DIRECT_IO_BLOCK) as block:  # page-aligned, as O_DIRECT needs
            os.write(fd, block)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        raise
    finally:
        os.close(fd)
    return True


def prepare_base(plan: DiskPlan, downloaded: str, base: str) -> None:
    """Move an inspected download to ``base``, converting it to raw when the plan says so.

    ``downloaded`` is consumed (renamed or removed); it is not inspected again (the download
    path did, on the same bytes). The conversion is written next to it, as
    ``<downloaded>.converted`` (so a hidden ``.<sha1>.part-XXXX`` download name stays a
    partial file for the image cache), durably, then renamed: a failed conversion or a crash
    leaves no ``base`` with partial data. Durably as Nova does it: ``qemu-img convert -t none``
    (O_DIRECT, flushed before it exits) where the file system supports direct I/O, else
    ``-t writeback`` (page cache, fdatasync before it exits); then an fsync of our own, which
    finds nothing left to write but does not rely on qemu-img's flush.

    :raises QemuImgError: when the conversion fails or takes longer than
        ``plan.convert_timeout`` (it is killed then; nothing is left behind either).
    """
    if not plan.convert:
        os.replace(downloaded, base)
        return
    staged = f"{downloaded}.converted"
    try:
        cache = "none" if supports_direct_io(staged) else "writeback"
        qemu.convert(downloaded, plan.source_format, staged, plan.base_format,
                     timeout_s=plan.convert_timeout, cache=cache, out_of_order=OUT_OF_ORDER)
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
    LOG.info("Converted %s from %s to %s (qemu-img -t %s)", base, plan.source_format,
             plan.base_format, cache)


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
