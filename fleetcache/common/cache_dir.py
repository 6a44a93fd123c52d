"""Where a compute's image cache lives: ``<instances_path>/<[image_cache] subdirectory_name>``
(Nova's ``_base``).

Here rather than with the rest of the cache's layout
(:mod:`fleetcache.compute.imagecache.layout`, which re-exports it) because the privsep daemon
needs it too: the only place it lets ``rbd export`` write into is a FIFO directly inside this
directory, as *its own* configuration names it (:mod:`fleetcache.privsep.rbd`).
"""

from __future__ import annotations

import os

from oslo_config import cfg


def cache_dir(conf: cfg.ConfigOpts) -> str:
    """The cache directory (read from ``conf`` on every call, so a changed option is
    followed at once).

    :param conf: a configuration with ``[DEFAULT]`` and ``[image_cache]`` registered.
    """
    instances_path: str = conf.instances_path
    return os.path.join(instances_path, conf.image_cache.subdirectory_name)
