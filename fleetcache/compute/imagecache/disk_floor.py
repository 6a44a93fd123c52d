"""The disk-space floor of the image cache (``[image_cache] disk_free_floor``).

A compute must never fill the file system its instances live on for a pre-cache. The floor is
one of the cache's download checks (:class:`~fleetcache.compute.imagecache.download.
DownloadCheck`), so it sees a download at the three moments that matter:

1. before the first byte: the image's ``size`` (plus its ``virtual_size`` when the disk
   backend converts the download, since both files exist until the conversion ends) must fit
   above the floor, else the image is refused at once;
2. while the bytes are written: before each chunk is written, the free space less the chunk
   must stay above the floor (the image service's ``size`` may be missing, or other writers
   share the file system);
3. on the complete, inspected file, before a conversion: the converted copy must fit as
   well, at the virtual size ``qemu-img info`` read from the file (a compressed qcow2 of
   400 KiB can declare nothing and convert to 64 MiB: the image service's ``virtual_size``
   is only a hint, and may be missing).

A refusal raises :class:`~fleetcache.common.exception.DiskFloorReached`; the download's
cleanup removes the temporary file, and the compute answers ``skipped`` with the reason
``disk``. ``statvfs`` costs about a microsecond, so checking every chunk is free beside
writing it.
"""

from __future__ import annotations

import dataclasses
import os
import re

from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute import imagebackend
from fleetcache.compute.imagecache.layout import cache_dir
from fleetcache.image import ImageMeta
from fleetcache.image.source import Buffer

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
#: Bytes with an optional binary unit: ``500M``, ``2G``, ``1GiB``, ``4096`` (oslo.utils'
#: ``string_to_bytes`` refuses a bare number and reads ``500M`` as nothing).
_BYTES = re.compile(r"^\s*(\d+)\s*(?:([KMGT])(?:i?B)?)?\s*$", re.IGNORECASE)
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@dataclasses.dataclass(frozen=True)
class Floor:
    """A floor in bytes, or in percent of the file system's size."""

    text: str
    bytes: int = 0
    percent: float = 0.0

    @classmethod
    def parse(cls, text: str) -> Floor:
        """:raises InvalidConfiguration: for anything but bytes (with a unit) or a percentage."""
        match = _PERCENT.match(text)
        if match is not None:
            percent = float(match.group(1))
            if percent >= 100:
                raise exception.InvalidConfiguration(
                    reason=f"[image_cache] disk_free_floor = {text!r}: below 100% please")
            return cls(text, percent=percent)
        match = _BYTES.match(text)
        if match is None:
            raise exception.InvalidConfiguration(
                reason=f"[image_cache] disk_free_floor = {text!r} is neither bytes (4096, "
                "500M, 2G, 1GiB) nor a percentage (10%)")
        unit = match.group(2)
        return cls(text, bytes=int(match.group(1)) * (_UNITS[unit.upper()] if unit else 1))

    @property
    def enabled(self) -> bool:
        return bool(self.bytes or self.percent)

    def free_above(self, path: str) -> int:
        """Bytes the file system of ``path`` has free above the floor (negative: below)."""
        st = os.statvfs(path)
        floor = self.bytes or int(st.f_blocks * st.f_frsize * self.percent / 100)
        return st.f_bavail * st.f_frsize - floor


class DiskFloorCheck:
    """The floor's watch over one download into ``directory`` (see the module docstring)."""

    def __init__(self, floor: Floor, directory: str, meta: ImageMeta) -> None:
        self.floor = floor
        self.directory = directory
        self.meta = meta

    def refuse_if_short(self, needed: int, what: str) -> None:
        """:raises DiskFloorReached: when ``needed`` bytes do not fit above the floor."""
        room = self.floor.free_above(self.directory)
        if needed > room:
            raise exception.DiskFloorReached(
                image_id=self.meta.id, floor=self.floor.text,
                reason=f"{what} needs {needed} bytes, {max(room, 0)} are free above the floor "
                f"on {self.directory}")

    def feed(self, chunk: Buffer) -> None:
        self.refuse_if_short(len(chunk), "the next chunk")

    def finish(self, path: str) -> None:
        """Nothing more: every chunk was checked, and the conversion is checked on the size
        read from the file (:meth:`before_conversion`)."""

    def before_conversion(self, virtual_size: int) -> None:
        self.refuse_if_short(virtual_size, "the converted copy")


class DiskFloor:
    """The cache's floor: a :data:`~.download.CheckFactory` (``floor(ctxt, meta)``)."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        self.floor = Floor.parse(conf.image_cache.disk_free_floor)

    def __call__(self, ctxt: RequestContext, meta: ImageMeta) -> DiskFloorCheck | None:
        """The check of one download, or ``None`` without a floor.

        :raises DiskFloorReached: the image's declared size already does not fit.
        """
        if not self.floor.enabled:
            return None
        converted = 0
        if meta.disk_format:
            plan = imagebackend.choose(self.conf, meta.disk_format)
            if plan.convert:
                converted = meta.virtual_size or meta.size or 0
        check = DiskFloorCheck(self.floor, cache_dir(self.conf), meta)
        if meta.size:
            check.refuse_if_short(meta.size + converted, "the image")
        return check
