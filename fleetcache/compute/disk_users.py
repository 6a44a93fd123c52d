"""Which cached base images the instance disks of this host use (for the ageing pass).

Every ``<instances_path>/*/disk`` is looked at:

* its ``disk.json`` (:mod:`fleetcache.compute.disk_record`, written at create time) says
  the disk's format. A ``raw`` disk is a copy and uses no base after creation, so qemu-img is
  not even run on it;
* a ``qcow2`` disk's backing file is read with ``qemu-img info --output=json -f qcow2 -U``:
  the disk itself is the truth about what qemu opens (as Nova's ``_list_backing_images``),
  ``-f`` comes from the record (never a probe) and ``-U`` lets it read a disk a running guest
  holds. Should qemu-img fail, the base named in the record counts as used;
* a disk without a record (made by something else) is read as qcow2 only if it starts with
  the qcow2 magic (qemu-img with ``-f qcow2`` refuses anything else anyway); if that fails,
  the disk is *unknown*, and the ageing pass then removes nothing: a base wrongly kept costs
  disk space, a base wrongly removed breaks a guest.
"""

from __future__ import annotations

import dataclasses
import os

from oslo_config import cfg
from oslo_log import log as logging

from fleetcache.common import exception
from fleetcache.compute.disk_record import DISK_NAME, read_record
from fleetcache.image import qemu

LOG = logging.getLogger(__name__)

QCOW2_MAGIC = b"QFI\xfb"


@dataclasses.dataclass
class DiskUsers:
    """The result of one scan.

    :ivar bases: cache file name -> names of the instance directories whose disk uses it.
    :ivar unknown: instance directories whose disk could not be read (nothing may be removed).
    """

    bases: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    unknown: list[str] = dataclasses.field(default_factory=list)


def scan(conf: cfg.ConfigOpts, base_dir: str) -> DiskUsers:
    """Find the users of the files in ``base_dir`` among ``<instances_path>/*/disk``."""
    users = DiskUsers()
    base_dir = os.path.realpath(base_dir)
    try:
        with os.scandir(conf.instances_path) as it:
            dirs = sorted(e.path for e in it if e.is_dir(follow_symlinks=False))
    except FileNotFoundError:
        return users
    for directory in dirs:
        disk = os.path.join(directory, DISK_NAME)
        if not os.path.isfile(disk):
            continue
        backing = _backing_files(conf, directory, disk)
        if backing is None:
            users.unknown.append(directory)
            continue
        for path in backing:
            path = os.path.realpath(path)
            if os.path.dirname(path) == base_dir:
                users.bases.setdefault(os.path.basename(path), set()).add(
                    os.path.basename(directory))
    return users


def _backing_files(conf: cfg.ConfigOpts, directory: str, disk: str) -> set[str] | None:
    """The files ``disk`` is backed by; ``None`` when that cannot be known."""
    record = read_record(directory)
    if record is not None and record["format"] == "raw":
        return set()
    if record is None and not _has_qcow2_magic(disk):
        return set()
    try:
        info = qemu.info(disk, "qcow2", cpu_time_s=conf.libvirt.images_cpu_time_limit,
                         address_space_gib=conf.libvirt.images_address_space_limit,
                         force_share=True)
    except exception.QemuImgError as exc:
        if record is not None:
            LOG.warning("Cannot read the backing file of %s (%s); keeping its recorded base "
                        "%s", disk, exc, record["base"])
            return {record["base"]}
        LOG.warning("Cannot read the backing file of %s (%s); no base image is removed while "
                    "it is unknown", disk, exc)
        return None
    backing = info.get("full-backing-filename") or info.get("backing-filename")
    return {os.path.join(directory, str(backing))} if backing else set()


def _has_qcow2_magic(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(QCOW2_MAGIC)) == QCOW2_MAGIC
    except OSError:
        return True  # unreadable: let qemu-img say (and fail to "unknown")
