"""The compute agent's RPC endpoint (topic ``compute``): thin, delegating to the virt driver."""

from __future__ import annotations

import logging

import oslo_messaging as messaging
from oslo_config import cfg

from fleetcache.common.context import RequestContext
from fleetcache.common.db.jobs import ImageResult
from fleetcache.compute import rpcapi
from fleetcache.compute.virt import driver as virt_driver

LOG = logging.getLogger(__name__)


class ComputeManager:
    """Serves the compute RPC API on one host."""

    target = messaging.Target(version=rpcapi.RPC_API_VERSION)

    def __init__(self, conf: cfg.ConfigOpts, driver: virt_driver.ComputeDriver) -> None:
        self.conf = conf
        self.driver = driver

    def cache_images(self, ctxt: RequestContext, image_ids: list[str]) -> dict[str, ImageResult]:
        """Cache each image in order; never raises.

        :returns: ``{image_id: {"state": cached|existing|error|unsupported, "reason": ...,
            "bytes_downloaded": N}}``, one entry per requested image.
        """
        results: dict[str, ImageResult] = {}
        for image_id in image_ids:
            results[image_id] = self._cache_one(ctxt, image_id)
        return results

    def _cache_one(self, ctxt: RequestContext, image_id: str) -> ImageResult:
        try:
            outcome = self.driver.cache_image(ctxt, image_id)
        except NotImplementedError:
            LOG.warning(
                "Virt driver %s does not support image caching; image %s not cached",
                type(self.driver).__name__,
                image_id,
            )
            return ImageResult(state="unsupported", reason="driver has no image cache",
                               bytes_downloaded=0)
        except Exception as exc:
            LOG.exception("Caching image %s failed", image_id)
            return ImageResult(state="error", reason=str(exc) or type(exc).__name__,
                               bytes_downloaded=0)
        state = "cached" if outcome.cached else "existing"
        return ImageResult(state=state, reason=None, bytes_downloaded=outcome.bytes_downloaded)
