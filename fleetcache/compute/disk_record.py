"""``<instances_path>/<uuid>/disk.json``: what an instance's disk was made from.

:mod:`~fleetcache.compute.instance_disks` writes it when it creates the disk;
:mod:`~fleetcache.compute.disk_users` reads it for the ageing pass, to pass ``-f`` to
``qemu-img`` from what fleetcache wrote, never from what a disk's header claims. Both sides
of that contract live here, so that the ageing pass (which reads records) does not depend on
the code that creates disks from the cache.
"""

from __future__ import annotations

import json
import os
from typing import Any, TypedDict

#: The instance's disk, in its directory.
DISK_NAME = "disk"
#: Its record, beside it.
RECORD_NAME = "disk.json"


class DiskRecord(TypedDict):
    """What the instance's disk was made from."""

    image_id: str
    backend: str
    format: str
    base: str
    base_format: str


def read_record(directory: str) -> DiskRecord | None:
    """The instance's ``disk.json``; ``None`` when missing or unreadable."""
    try:
        with open(os.path.join(directory, RECORD_NAME), encoding="utf-8") as f:
            data: Any = json.load(f)
    except (OSError, ValueError):
        return None
    keys = DiskRecord.__annotations__
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in keys):
        return None
    return DiskRecord(image_id=data["image_id"], backend=data["backend"], format=data["format"],
                      base=data["base"], base_format=data["base_format"])


def write_record(directory: str, record: DiskRecord) -> None:
    """Write ``disk.json`` aside and rename it, so a reader never sees half a record."""
    tmp = os.path.join(directory, f".{RECORD_NAME}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, sort_keys=True)
    os.replace(tmp, os.path.join(directory, RECORD_NAME))
