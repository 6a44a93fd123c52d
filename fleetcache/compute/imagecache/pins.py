"""Pins: cached images a pre-cache request asked this host to keep until a time.

A pin is a small JSON record per cache file, beside the cache directory as the index is::

    <instances_path>/image_pins/<[image_cache] subdirectory_name>/<sha1>
        {"image_id": "...", "until": 1795000000.0}

The compute manager writes it, under the image's lock, once the image is cached (a second
pin keeps the later of the two times). The ageing pass never removes a pinned file: it skips
it, and :meth:`~fleetcache.compute.imagecache.cache.ImageCache.remove_if_older` asks again
under the image's lock, so a pin written while a pass runs is honoured; an expired pin is
dropped under that lock too, after reading it again (:meth:`PinStore.prune`). Once ``until`` has
passed the record is dropped and the file ages as any other (its last use, the pre-cache
that pinned it or a later one, against ``remove_unused_original_minimum_age_seconds``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypedDict

from oslo_config import cfg

from fleetcache.compute.imagecache import files
from fleetcache.compute.imagecache.layout import cache_name, pins_dir


class PinRecord(TypedDict):
    image_id: str
    until: float


class PinStore:
    """The pins of one image cache (see the module docstring for who writes them)."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf

    @property
    def directory(self) -> str:
        return pins_dir(self.conf)

    def get(self, name: str) -> PinRecord | None:
        """The pin of cache file ``name``, or ``None`` (none, or unreadable)."""
        data = files.read_record(self.directory, name)
        if (not isinstance(data, dict) or not isinstance(data.get("image_id"), str)
                or not isinstance(data.get("until"), (int, float))
                or cache_name(data["image_id"]) != name):
            return None
        return PinRecord(image_id=data["image_id"], until=float(data["until"]))

    def is_pinned(self, name: str, now: float | None = None) -> bool:
        """Whether cache file ``name`` is pinned at ``now`` (default: now)."""
        record = self.get(name)
        return record is not None and record["until"] > (time.time() if now is None else now)

    def pin(self, image_id: str, until: float) -> PinRecord:
        """Pin ``image_id`` until ``until`` (epoch seconds), or keep a later pin; the caller
        holds the image's lock. :raises OSError: the record could not be written."""
        name = cache_name(image_id)
        old = self.get(name)
        record = PinRecord(image_id=image_id,
                           until=max(float(until), old["until"] if old else 0.0))
        if record != old:
            self._write(name, record)
        return record

    def pins(self) -> dict[str, PinRecord]:
        """Every readable pin by cache file name (expired ones included)."""
        try:
            names = sorted(n for n in os.listdir(self.directory) if not n.startswith("."))
        except FileNotFoundError:
            return {}
        return {n: r for n in names if (r := self.get(n)) is not None}

    def prune(self, lock: Callable[[str], AbstractContextManager[Any]],
              now: float | None = None) -> list[str]:
        """Remove the pins that have expired. :returns: their names.

        :param lock: the lock of a cache file by name (``ImageCache.lock_entry``): each
            expired pin is read again under it, so that a pin renewed since the first read
            (a pre-cache request with ``pin_seconds`` writes under the same lock) stays.
        """
        now = time.time() if now is None else now
        removed = []
        for name, record in self.pins().items():
            if record["until"] > now:
                continue
            with lock(name):
                again = self.get(name)
                if again is None or again["until"] > now:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.directory, name))
            removed.append(name)
        return removed

    def _write(self, name: str, record: PinRecord) -> None:
        files.write_record(self.directory, name, record)
