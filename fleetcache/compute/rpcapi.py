"""Client side of the compute RPC API (topic ``compute``, server = the compute's host name).

The conductor builds one client per cell transport: each cell's computes listen on their
cell's broker.

API version history:

* 1.0 - Initial version: cache_images
"""

from __future__ import annotations

import oslo_messaging as messaging
from oslo_config import cfg

from fleetcache.common import rpc
from fleetcache.common.context import RequestContext
from fleetcache.common.db.jobs import ImageResult

TOPIC = "compute"
RPC_API_VERSION = "1.0"


class ComputeAPI:
    """Calls into compute agents reachable over ``transport`` (one cell's)."""

    def __init__(self, conf: cfg.ConfigOpts, transport: messaging.Transport) -> None:
        self.conf = conf
        self.client = rpc.get_client(transport, TOPIC, version_cap=RPC_API_VERSION)

    def cache_images(
        self, ctxt: RequestContext, host: str, image_ids: list[str]
    ) -> dict[str, ImageResult]:
        """Have ``host`` cache ``image_ids`` in order; returns each image's outcome.

        NOTE: a download may take many minutes, so the hard limit is ``long_rpc_timeout``; the
        compute's heartbeats every ``rpc_response_timeout / 2`` (call_monitor_timeout) let a
        dead compute be noticed within ``rpc_response_timeout`` instead.

        :raises MessagingTimeout: when the compute is dead or the hard limit passed.
        """
        cctxt = self.client.prepare(
            server=host,
            version="1.0",
            timeout=self.conf.long_rpc_timeout,
            call_monitor_timeout=self.conf.rpc_response_timeout,
            retry=self.conf.rpc_send_retries,
        )
        return cctxt.call(ctxt, "cache_images", image_ids=image_ids)  # type: ignore[no-any-return]
