"""The disk virt driver: caches images in ``instances_path`` from the configured image source.

It is the driver real computes run. Its image cache is :class:`ImageCache`; the image source is
``[image_source] backend`` (Glance by default), loaded when the driver is built so that a bad
name stops the compute at start-up. Downloads are checked for format safety always and for
signatures when ``[glance] verify_glance_signatures`` is on; with ``[glance]
allowed_direct_url_schemes = rbd`` an image stored in this compute's Ceph cluster is exported
from it directly (:mod:`~fleetcache.compute.imagecache.direct`), falling back to the source.
``init_host`` refuses a configuration the compute cannot run
(:func:`~fleetcache.compute.config_check.enforce_config`), and the image types it reports
derive from that configuration (:func:`~fleetcache.compute.imagebackend.supported_image_types`).
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.common.rbd_settings import RbdSettings
from fleetcache.compute import config_check, imagebackend
from fleetcache.compute.imagebackend.selection import IMAGE_TYPES
from fleetcache.compute.imagecache import CacheOutcome, DownloadTerms, ImageCache, RbdDirect
from fleetcache.compute.imagecache.bandwidth import throttled
from fleetcache.compute.imagecache.disk_floor import DiskFloor
from fleetcache.compute.rpcapi import IMAGE_TYPE_CAPABILITY, Peer
from fleetcache.compute.virt.driver import ComputeDriver
from fleetcache.image import ImageSource, load_image_source, signature


class DiskDriver(ComputeDriver):
    """Image cache (and, later, instance disks) on the host's file system."""

    #: Declared; ``supports_image_type_*`` are added from the configuration.
    capabilities: dict[str, Any] = {"has_imagecache": True}

    def __init__(
        self,
        conf: cfg.ConfigOpts,
        source: ImageSource | None = None,
        load_certificate: signature.CertificateLoader = signature.key_manager_certificate,
    ) -> None:
        """:param load_certificate: where image signing certificates come from."""
        super().__init__(conf)
        checks = (functools.partial(signature.signature_check, conf,
                                    load_certificate=load_certificate),
                  DiskFloor(conf))
        settings = RbdSettings.from_conf(conf)
        self._image_cache = ImageCache(conf, throttled(conf, source or load_image_source(conf)),
                                       checks, RbdDirect(settings) if settings else None)

    @property
    def image_cache(self) -> ImageCache:
        return self._image_cache

    def get_capabilities(self) -> dict[str, Any]:
        """The declared capabilities plus ``supports_image_type_<t>`` for every image type."""
        supported = imagebackend.supported_image_types(self.conf)
        return {**self.capabilities,
                **{f"{IMAGE_TYPE_CAPABILITY}{t}": t in supported for t in IMAGE_TYPES}}

    def init_host(self, host: str) -> None:
        """Check the configuration, create the cache and lock directories, check that they
        are writable, and remove partial downloads a killed predecessor left.

        :raises InvalidConfiguration: listing every configuration error (option and rule),
            or naming ``[DEFAULT] instances_path`` and the error.
        """
        config_check.enforce_config(self.conf)
        path = self.conf.instances_path
        try:
            self.image_cache.ensure_dirs()
            for directory in (path, self.image_cache.base_dir, self.image_cache.lock_path):
                with tempfile.TemporaryFile(dir=directory, prefix=".write-test-"):
                    pass
        except OSError as exc:
            raise exception.InvalidConfiguration(
                reason=f"[DEFAULT] instances_path {path!r} is not usable on host {host}: "
                f"{exc.strerror or exc} ({getattr(exc, 'filename', None) or path}); make it a "
                "directory this user can write, or set another path"
            ) from exc
        if not os.access(path, os.W_OK | os.X_OK):
            raise exception.InvalidConfiguration(
                reason=f"[DEFAULT] instances_path {path!r} is not writable on host {host}; "
                "make it a directory this user can write, or set another path")
        self.image_cache.remove_stale_partials()

    def cache_image(self, ctxt: RequestContext, image_id: str,
                    peers: Sequence[Peer] = (),
                    terms: DownloadTerms | None = None) -> CacheOutcome:
        return self.image_cache.fetch(ctxt, image_id, peers=peers, terms=terms)
