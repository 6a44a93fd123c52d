"""Which image each cache file holds: the index behind the compute's cache reports.

A cached image is named ``sha1(image_id)``, which cannot be turned back into the id the
conductor and the scheduler speak of. The index keeps, per cached file, a small JSON record::

    <instances_path>/image_ids/<[image_cache] subdirectory_name>/<sha1>
        {"image_id": "...", "disk_format": "qcow2", "base_format": "raw"}

It lives beside the cache directory, not in it, so the cache directory holds images only.
``base_format`` is the format the cached file was stored in (``raw`` when the download was
converted), so that instance disks name it with ``-F`` instead of letting anything probe the
file. Records are written by every download (:meth:`CacheIndex.download_check`, a
:class:`~fleetcache.compute.imagecache.DownloadCheck` that records the plan the download
publishes with), after a pre-cache hit, and pruned by the ageing pass once their file is gone,
always under the image's lock. Records are written aside and renamed. A missing record only
means the image is not reported; it never makes a file removable.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import TypedDict

from oslo_concurrency import lockutils

from fleetcache.common.context import RequestContext
from fleetcache.compute import imagebackend
from fleetcache.compute.imagecache import ImageCache, cache_name
from fleetcache.image import ImageMeta

INDEX_DIR = "image_ids"


class IndexRecord(TypedDict):
    image_id: str
    disk_format: str | None
    base_format: str | None


class CacheIndex:
    """The index of one :class:`ImageCache`."""

    def __init__(self, cache: ImageCache) -> None:
        self.cache = cache

    @property
    def directory(self) -> str:
        conf = self.cache.conf
        return os.path.join(conf.instances_path, INDEX_DIR, conf.image_cache.subdirectory_name)

    def record(self, image_id: str, disk_format: str | None = None,
               base_format: str | None = None) -> IndexRecord:
        """Remember that ``cache_name(image_id)`` holds ``image_id``.

        Known formats of an existing record are kept when not given again.
        """
        old = self.get(cache_name(image_id))
        record = IndexRecord(
            image_id=image_id,
            disk_format=disk_format or (old["disk_format"] if old else None),
            base_format=base_format or (old["base_format"] if old else None),
        )
        if record != old:
            self._write(cache_name(image_id), record)
        return record

    def download_check(self, ctxt: RequestContext, meta: ImageMeta) -> _IndexingCheck | None:
        """A ``CheckFactory`` for :attr:`ImageCache.checks`: each download records its image.

        The base format is the one the download publishes with (the plan of this
        configuration, as the download computes it); a download refused after this is
        harmless: its record has no file and is pruned.
        """
        if not meta.disk_format:
            return None  # the download refuses it
        plan = imagebackend.choose(self.cache.conf, meta.disk_format)
        return _IndexingCheck(self, meta.id, meta.disk_format, plan.base_format)

    def get(self, name: str) -> IndexRecord | None:
        """The record of cache file ``name``, or ``None`` when there is none (or it is bad)."""
        try:
            with open(os.path.join(self.directory, name), encoding="utf-8") as f:
                data = json.load(f)
        except (FileNotFoundError, ValueError, UnicodeDecodeError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("image_id"), str):
            return None
        if cache_name(data["image_id"]) != name:
            return None
        return IndexRecord(image_id=data["image_id"], disk_format=data.get("disk_format"),
                           base_format=data.get("base_format"))

    def prune(self) -> list[str]:
        """Remove the records whose cache file is gone. :returns: their names.

        Each is checked and removed under its image's lock (skipped while someone holds it),
        so a record written by a fetch that has just finished is never lost.
        """
        try:
            names = [n for n in os.listdir(self.directory) if not n.startswith(".")]
        except FileNotFoundError:
            return []
        removed = []
        for name in sorted(names):
            try:
                with self.cache.lock_entry(name, blocking=False):
                    if os.path.exists(os.path.join(self.cache.base_dir, name)):
                        continue
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(self.directory, name))
            except lockutils.AcquireLockFailedException:
                continue
            removed.append(name)
        return removed

    def _write(self, name: str, record: IndexRecord) -> None:
        os.makedirs(self.directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f, sort_keys=True)
            os.replace(tmp, os.path.join(self.directory, name))
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


class _IndexingCheck:
    """Records one download in the index once its bytes are complete (sees no bytes)."""

    def __init__(self, index: CacheIndex, image_id: str, disk_format: str,
                 base_format: str) -> None:
        self.index = index
        self.image_id = image_id
        self.disk_format = disk_format
        self.base_format = base_format

    def feed(self, chunk: bytes) -> None:
        pass

    def finish(self, path: str) -> None:
        self.index.record(self.image_id, self.disk_format, self.base_format)
