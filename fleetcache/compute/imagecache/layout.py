"""Where the image cache keeps things on disk (the layout is Nova's; operators rely on it)::

    <instances_path>/<[image_cache] subdirectory_name>/<sha1(image_id)>   a cached image
    <instances_path>/<[image_cache] subdirectory_name>/.<sha1>.part-XXXX  a download under way
    <instances_path>/<[image_cache] subdirectory_name>/.<sha1>.paused     a paused download
    <instances_path>/locks/fleetcache-<sha1>                               its lock file
    <instances_path>/image_ids/<[image_cache] subdirectory_name>/<sha1>   its index record
    <instances_path>/image_pins/<[image_cache] subdirectory_name>/<sha1>  its pin, if any

The cache (:mod:`~fleetcache.compute.imagecache.cache`) and its index
(:mod:`~fleetcache.compute.imagecache.index`) both name files this way; the paths are read
from the configuration on every call, so a changed option is followed at once. The cache
directory itself is :func:`fleetcache.common.cache_dir.cache_dir` (the privsep daemon resolves
it too), re-exported here.
"""

from __future__ import annotations

import hashlib
import os

from oslo_config import cfg

from fleetcache.common.cache_dir import cache_dir as cache_dir  # re-exported

#: Prefix of every lock file fleetcache takes in ``<instances_path>/locks``.
LOCK_PREFIX = "fleetcache-"
#: Marks a download under way: ``.<sha1>.part-XXXX`` (hidden, so never taken for an image).
PART_MARK = ".part-"
#: Marks a paused download (:mod:`~fleetcache.compute.imagecache.paused`): ``.<sha1>.paused``
#: (hidden like a download under way, but without its mark: start-up leaves it alone).
PAUSED_MARK = ".paused"
#: Directory of the index records, beside the cache directory (which holds images only).
INDEX_DIR = "image_ids"
#: Directory of the pins (:mod:`~fleetcache.compute.imagecache.pins`), beside the index.
PINS_DIR = "image_pins"


def cache_name(image_id: str) -> str:
    """File name of ``image_id`` in the cache: the hex sha1 of the id (as Nova)."""
    return hashlib.sha1(image_id.encode("utf-8"), usedforsecurity=False).hexdigest()


def partial_prefix(image_id: str) -> str:
    """The name every download of ``image_id`` under way starts with."""
    return f".{cache_name(image_id)}{PART_MARK}"


def is_partial(name: str) -> bool:
    """Whether a cache directory entry is a download under way (or left by a crash)."""
    return name.startswith(".") and PART_MARK in name


def paused_name(image_id: str) -> str:
    """File name of the paused download of ``image_id``."""
    return f".{cache_name(image_id)}{PAUSED_MARK}"


def paused_cache_name(name: str) -> str | None:
    """The cache file name a paused download's file ``name`` belongs to (None: ``name`` is
    not a paused download's)."""
    if not (name.startswith(".") and name.endswith(PAUSED_MARK)):
        return None
    return name[1:-len(PAUSED_MARK)] or None


def locks_dir(conf: cfg.ConfigOpts) -> str:
    """The directory of the lock files."""
    instances_path: str = conf.instances_path
    return os.path.join(instances_path, "locks")


def index_dir(conf: cfg.ConfigOpts) -> str:
    """The directory of the index records."""
    instances_path: str = conf.instances_path
    return os.path.join(instances_path, INDEX_DIR, conf.image_cache.subdirectory_name)


def pins_dir(conf: cfg.ConfigOpts) -> str:
    """The directory of the pins."""
    instances_path: str = conf.instances_path
    return os.path.join(instances_path, PINS_DIR, conf.image_cache.subdirectory_name)
