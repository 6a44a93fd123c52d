"""The virt driver contract and its loader.

A driver is what a compute agent does on its host. The manager calls it and turns its errors
into per-image states, so a driver may raise freely:

* ``cache_image`` returns a :class:`~fleetcache.compute.imagecache.CacheOutcome`; raising
  ``NotImplementedError`` means the driver has no image cache (reported as ``unsupported``);
  any other exception is ``error``.
* ``image_cache`` is the driver's on-disk :class:`~fleetcache.compute.imagecache.ImageCache`,
  or ``None`` when it keeps none (the fake driver's cache is in memory): instance disks, the
  ageing pass and the cache reports exist only where it is set.
* ``capabilities`` is declared, never guessed: traits derive from it.
* ``get_host_uptime`` answers the host's ``uptime(1)`` text; every fleetcache driver runs on
  the host it reports, so the base reads it from the kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oslo_config import cfg
from stevedore import ExtensionManager
from stevedore import driver as stevedore_driver
from stevedore.exception import NoMatches

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute import host_uptime
from fleetcache.compute.imagecache import CacheOutcome, DownloadTerms, ImageCache
from fleetcache.compute.rpcapi import Peer

DRIVER_NAMESPACE = "fleetcache.compute.drivers"


class ComputeDriver:
    """Base of every virt driver. Subclasses override what they support."""

    #: Declared abilities of the driver; image-type traits derive from these.
    capabilities: dict[str, Any] = {"has_imagecache": False}

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf

    def init_host(self, host: str) -> None:
        """Prepare the host (directories, checks); called once before serving RPC.

        :raises InvalidConfiguration: when the host cannot run this driver as configured.
        """

    @property
    def image_cache(self) -> ImageCache | None:
        """The driver's on-disk image cache; ``None`` (the default) when it keeps none."""
        return None

    def get_capabilities(self) -> dict[str, Any]:
        """What the compute reports to the conductor at registration and heartbeat."""
        return dict(self.capabilities)

    def get_host_uptime(self) -> str:
        """The host's uptime as ``uptime(1)`` prints it (Nova's driver method of that name).

        :raises NotImplementedError: when the host cannot tell.
        """
        return host_uptime.host_uptime()

    def cache_image(self, ctxt: RequestContext, image_id: str,
                    peers: Sequence[Peer] = (),
                    terms: DownloadTerms | None = None) -> CacheOutcome:
        """Make sure ``image_id`` is in this host's image cache.

        A hit renews the image's lease in the cache (touch) and returns ``downloaded=False``.
        ``peers``: hosts of this one's peer group to fetch it from before the image service.
        ``terms``: the call's end time and rate (:mod:`~fleetcache.compute.imagecache.terms`).

        :raises NotImplementedError: when the driver has no image cache.
        :raises DownloadPaused: the call's end time came before the image was cached.
        """
        raise NotImplementedError("this virt driver does not cache images")


def load_compute_driver(conf: cfg.ConfigOpts) -> ComputeDriver:
    """Load ``[DEFAULT] compute_driver`` by entry point name.

    :raises InvalidConfiguration: naming the known drivers when the name is unknown.
    """
    name = conf.compute_driver
    try:
        manager: stevedore_driver.DriverManager[ComputeDriver] = stevedore_driver.DriverManager(
            DRIVER_NAMESPACE, name, invoke_on_load=True, invoke_args=(conf,)
        )
    except NoMatches as exc:
        known = sorted(ExtensionManager(DRIVER_NAMESPACE).names())
        raise exception.InvalidConfiguration(
            reason=f"[DEFAULT] compute_driver={name!r} is unknown; known drivers: {known}"
        ) from exc
    loaded = manager.driver
    if not isinstance(loaded, ComputeDriver):
        raise exception.InvalidConfiguration(
            reason=f"[DEFAULT] compute_driver={name!r} is not a ComputeDriver"
        )
    return loaded
