"""The disk virt driver: caches images in ``instances_path`` from the configured image source.

It is the driver real computes run. Its image cache is :class:`ImageCache`; the image source is
``[image_source] backend`` (Glance by default), loaded when the driver is built so that a bad
name stops the compute at start-up.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import ImageCache
from fleetcache.compute.virt.driver import CacheOutcome, ComputeDriver
from fleetcache.image import ImageSource, load_image_source


class DiskDriver(ComputeDriver):
    """Image cache (and, later, instance disks) on the host's file system."""

    capabilities: dict[str, Any] = {
        "has_imagecache": True,
        "supports_image_type_raw": True,
        "supports_image_type_qcow2": True,
    }

    def __init__(self, conf: cfg.ConfigOpts, source: ImageSource | None = None) -> None:
        super().__init__(conf)
        self.image_cache = ImageCache(conf, source or load_image_source(conf))

    def init_host(self, host: str) -> None:
        """Create the cache and lock directories, check that they are writable, and remove
        partial downloads a killed predecessor left.

        :raises InvalidConfiguration: naming ``[DEFAULT] instances_path`` and the error.
        """
        path = self.conf.instances_path
        try:
            self.image_cache.ensure_dirs()
            for directory in (path, self.image_cache.base_dir, self.image_cache.lock_path):
                with tempfile.TemporaryFile(dir=directory, prefix=".write-test-"):
                    pass
        except OSError as exc:
            raise exception.InvalidConfiguration(
                reason=f"[DEFAULT] instances_path {path!r} is not usable on host {host}: "
                f"{exc.strerror or exc} ({getattr(exc, 'filename', None) or path})"
            ) from exc
        if not os.access(path, os.W_OK | os.X_OK):
            raise exception.InvalidConfiguration(
                reason=f"[DEFAULT] instances_path {path!r} is not writable on host {host}")
        self.image_cache.remove_stale_partials()

    def cache_image(self, ctxt: RequestContext, image_id: str) -> CacheOutcome:
        return self.image_cache.fetch(ctxt, image_id)
