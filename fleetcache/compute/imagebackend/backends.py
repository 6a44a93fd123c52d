"""The disk backends: what each can hold, which host tools it needs, how it builds a disk.

Every backend writes one instance disk, ``<instances_path>/<uuid>/disk``, from a cached base
image that already passed format inspection. ``qcow2`` (an overlay whose backing file is the
base) and ``raw``/``flat`` (a sparse copy) run here; ``rbd`` makes its disks in Ceph instead
(:mod:`~fleetcache.compute.imagebackend.rbd_disks`); ``lvm`` and ``ploop`` are declared
(names, formats, tools, config rules) and raise ``NotImplementedError`` when asked for a disk.
``raw``/``flat`` need ``qemu-img`` only for a base that is not raw, and a host without it never
has one (format inspection refuses every other format there), so they do not require it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable
from typing import ClassVar

from oslo_concurrency import processutils
from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.image import qemu

Which = Callable[[str], str | None]

#: The Debian package that provides each tool a backend needs, for the fix a message names.
TOOL_PACKAGES = {"qemu-img": "qemu-utils", "cp": "coreutils", "lvcreate": "lvm2",
                 "lvremove": "lvm2", "lvs": "lvm2", "vgs": "lvm2", "rbd": "ceph-common",
                 "ploop": "ploop"}


def packages_for(tools: list[str]) -> str:
    """The Debian packages providing ``tools``, for an install hint."""
    return " ".join(sorted({TOOL_PACKAGES.get(tool, tool) for tool in tools}))


@dataclasses.dataclass(frozen=True)
class InstanceDisk:
    """A disk a backend created: which backend, where, in which format."""

    backend: str
    path: str
    format: str


class ImageBackend:
    """Base of the disk backends (Nova's ``nova.virt.libvirt.imagebackend.Image``)."""

    name: ClassVar[str] = ""
    #: Base image formats the backend uses as they are; others are converted to raw first.
    native_formats: ClassVar[frozenset[str]] = frozenset({"raw"})
    #: Host commands the backend needs (checked at start-up).
    required_tools: ClassVar[tuple[str, ...]] = ("qemu-img",)
    #: Whether :meth:`create_disk` works in this release.
    implemented: ClassVar[bool] = True

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf

    def missing_tools(self, which: Which = shutil.which) -> list[str]:
        return [tool for tool in self.required_tools if which(tool) is None]

    def config_errors(self) -> list[tuple[str, str]]:
        """``(option, message)`` for each option this backend needs and lacks."""
        return []

    def create_disk(self, base: str, base_format: str, disk: str, size: int | None) -> str:
        """Create ``disk`` from ``base``; returns the disk's format.

        :param size: bytes; ``None`` keeps the base's virtual size.
        :raises InvalidInput: when ``size`` is smaller than the base's virtual size.
        :raises QemuImgError: when qemu-img fails or outlives its time limit (``[libvirt]
            images_create_timeout`` for an overlay, ``images_convert_timeout`` for a copy).
        :raises DiskCreateFailed: when a copy could not be written (e.g. a full disk).
        """
        raise NotImplementedError(f"the {self.name} disk backend is not implemented yet")

    def _check_size(self, base: str, base_format: str, size: int | None) -> int:
        if base_format == "raw":  # no header: the virtual size is the file's size
            virtual_size = os.path.getsize(base)
        else:
            info = qemu.info(
                base,
                base_format,
                cpu_time_s=self.conf.libvirt.images_cpu_time_limit,
                address_space_gib=self.conf.libvirt.images_address_space_limit,
            )
            virtual_size = int(info["virtual-size"])
        if size is not None and size < virtual_size:
            raise exception.InvalidInput(
                reason=f"disk size {size} is smaller than the image's virtual size {virtual_size}"
            )
        return virtual_size


class Qcow2Backend(ImageBackend):
    name = "qcow2"
    native_formats = frozenset({"raw", "qcow2"})

    def create_disk(self, base: str, base_format: str, disk: str, size: int | None) -> str:
        virtual_size = self._check_size(base, base_format, size)
        qemu.create_overlay(base, base_format, disk, size if size != virtual_size else None,
                            timeout_s=self.conf.libvirt.images_create_timeout)
        return "qcow2"


class FlatBackend(ImageBackend):
    """``raw`` and ``flat``: the same sparse raw copy (Nova's ``Flat``)."""

    name = "flat"
    required_tools = ("cp",)

    def create_disk(self, base: str, base_format: str, disk: str, size: int | None) -> str:
        virtual_size = self._check_size(base, base_format, size)
        if base_format == "raw":
            try:
                processutils.execute("cp", "--sparse=always", "--", base, disk)
            except processutils.ProcessExecutionError as exc:
                raise exception.DiskCreateFailed(
                    disk=disk, reason=f"cp of {base} failed: {(exc.stderr or '').strip() or exc}"
                ) from exc
            except OSError as exc:
                raise exception.DiskCreateFailed(disk=disk, reason=f"cp: {exc}") from exc
        else:
            qemu.convert(base, base_format, disk, "raw",
                         timeout_s=self.conf.libvirt.images_convert_timeout)
        if size is not None and size > virtual_size:
            try:
                os.truncate(disk, size)
            except OSError as exc:
                raise exception.DiskCreateFailed(
                    disk=disk, reason=f"cannot grow it to {size} bytes: {exc}") from exc
        return "raw"


class RawBackend(FlatBackend):
    name = "raw"


class LvmBackend(ImageBackend):
    name = "lvm"
    required_tools = ("qemu-img", "lvcreate", "lvremove", "lvs", "vgs")
    implemented = False

    def config_errors(self) -> list[tuple[str, str]]:
        if not self.conf.libvirt.images_volume_group:
            return [("[libvirt] images_volume_group", "must be set when a backend is lvm")]
        return []


class RbdBackend(ImageBackend):
    """Disks in Ceph (:mod:`~fleetcache.compute.imagebackend.rbd_disks`), made by
    :class:`~fleetcache.compute.instance_disks.InstanceDisks` itself: a clone of Glance's
    snapshot needs no cached base, and the disk is no file under ``instances_path``. Raw is
    the only format it holds: any other image is converted to a raw base, then imported."""

    name = "rbd"
    required_tools = ("qemu-img", "rbd")

    def create_disk(self, base: str, base_format: str, disk: str, size: int | None) -> str:
        raise NotImplementedError("rbd disks live in Ceph, not in a file: they are made by "
                                  "InstanceDisks through rbd_disks.RbdDisks")


class PloopBackend(ImageBackend):
    name = "ploop"
    native_formats = frozenset({"raw", "ploop"})
    required_tools = ("qemu-img", "ploop")
    implemented = False

    def config_errors(self) -> list[tuple[str, str]]:
        if self.conf.libvirt.virt_type != "parallels":
            return [("[libvirt] virt_type", "must be parallels when a backend is ploop")]
        return []


BACKEND_CLASSES: dict[str, type[ImageBackend]] = {
    cls.name: cls
    for cls in (Qcow2Backend, FlatBackend, RawBackend, LvmBackend, RbdBackend, PloopBackend)
}


def get_backend(name: str, conf: cfg.ConfigOpts) -> ImageBackend:
    """The backend called ``name`` (``raw``, ``flat``, ``qcow2``, ``lvm``, ``rbd``, ``ploop``)."""
    try:
        return BACKEND_CLASSES[name](conf)
    except KeyError:
        raise exception.InvalidConfiguration(
            reason=f"unknown disk backend {name!r} (known: {', '.join(BACKEND_CLASSES)})"
        ) from None
