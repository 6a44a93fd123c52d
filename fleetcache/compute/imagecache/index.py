"""Which image each cache file holds: the index behind the compute's cache reports.

A cached image is named ``sha1(image_id)``, which cannot be turned back into the id the
conductor and the scheduler speak of. The index keeps, per cached file, a small JSON record::

    <instances_path>/image_ids/<[image_cache] subdirectory_name>/<sha1>
        {"image_id": "...", "disk_format": "qcow2", "base_format": "raw"}

It lives beside the cache directory, not in it, so the cache directory holds images only.
``base_format`` is the format the cached file was stored in (``raw`` when the download was
converted), so that instance disks name it with ``-F`` instead of letting anything probe the
file.

The index has one writer, its :class:`~fleetcache.compute.imagecache.cache.ImageCache`, and
the cache writes only under the image's lock: after it publishes a download, on a hit, when
an instance disk asks for the base format, and when it prunes the records whose file is gone.
Records are written aside and renamed. A missing record only means the image is not
reported; it never makes a file removable.
"""

from __future__ import annotations

import contextlib
import os
from typing import TypedDict

from oslo_config import cfg

from fleetcache.compute.imagecache import files
from fleetcache.compute.imagecache.layout import cache_name, index_dir


class IndexRecord(TypedDict):
    image_id: str
    disk_format: str | None
    base_format: str | None


class CacheIndex:
    """The index of one image cache (see the module docstring for who writes it)."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf

    @property
    def directory(self) -> str:
        return index_dir(self.conf)

    def get(self, name: str) -> IndexRecord | None:
        """The record of cache file ``name``, or ``None`` when there is none (or it is bad)."""
        data = files.read_record(self.directory, name)
        if not isinstance(data, dict) or not isinstance(data.get("image_id"), str):
            return None
        if cache_name(data["image_id"]) != name:
            return None
        return IndexRecord(image_id=data["image_id"], disk_format=data.get("disk_format"),
                           base_format=data.get("base_format"))

    def names(self) -> list[str]:
        """The names of the records (records being written are left out), sorted."""
        try:
            return sorted(n for n in os.listdir(self.directory) if not n.startswith("."))
        except FileNotFoundError:
            return []

    def record(self, image_id: str, disk_format: str | None = None,
               base_format: str | None = None) -> IndexRecord:
        """Remember that ``cache_name(image_id)`` holds ``image_id``; the caller holds the
        image's lock. Known formats of an existing record are kept when not given again, and
        an unchanged record is not rewritten.
        """
        name = cache_name(image_id)
        old = self.get(name)
        record = IndexRecord(
            image_id=image_id,
            disk_format=disk_format or (old["disk_format"] if old else None),
            base_format=base_format or (old["base_format"] if old else None),
        )
        if record != old:
            self._write(name, record)
        return record

    def remove(self, name: str) -> None:
        """Forget cache file ``name`` (if it was known); the caller holds its lock."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.directory, name))

    def _write(self, name: str, record: IndexRecord) -> None:
        files.write_record(self.directory, name, record)
