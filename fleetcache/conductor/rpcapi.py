"""Client side of the conductor RPC API (topic ``conductor``).

Used by the API (pre-cache requests) and by every service for registration and heartbeats,
which is how compute agents stay free of database credentials.

API version history:

* 1.0 - Initial version: register_service, service_heartbeat, cache_images
"""

from __future__ import annotations

from typing import Any

import oslo_messaging as messaging
from oslo_config import cfg

from fleetcache.common import rpc
from fleetcache.common.context import RequestContext
from fleetcache.common.db.api import ServiceDict
from fleetcache.common.db.jobs import JobDict

TOPIC = "conductor"
RPC_API_VERSION = "1.0"


class ConductorAPI:
    """Calls into a conductor over the given transport (default: ``[DEFAULT] transport_url``)."""

    def __init__(self, conf: cfg.ConfigOpts, transport: messaging.Transport | None = None) -> None:
        self.conf = conf
        transport = transport or rpc.get_transport(conf)
        self.client = rpc.get_client(transport, TOPIC, version_cap=RPC_API_VERSION)

    def _prepare(self, **kwargs: Any) -> Any:
        kwargs.setdefault("retry", self.conf.rpc_send_retries)
        return self.client.prepare(version="1.0", **kwargs)

    def register_service(
        self,
        ctxt: RequestContext,
        host: str,
        binary: str,
        topic: str,
        capabilities: dict[str, Any],
    ) -> ServiceDict:
        """Create or refresh the service record; the conductor maps it to the caller's cell."""
        cctxt = self._prepare()
        return cctxt.call(  # type: ignore[no-any-return]
            ctxt,
            "register_service",
            host=host,
            binary=binary,
            topic=topic,
            capabilities=capabilities,
        )

    def service_heartbeat(
        self,
        ctxt: RequestContext,
        host: str,
        binary: str,
        capabilities: dict[str, Any] | None = None,
    ) -> None:
        """Report that the service is alive (and, optionally, what it can do now)."""
        # A heartbeat older than report_interval is worthless: never wait longer than that.
        cctxt = self._prepare(timeout=self.conf.report_interval)
        cctxt.call(ctxt, "service_heartbeat", host=host, binary=binary, capabilities=capabilities)

    def cache_images(
        self, ctxt: RequestContext, aggregate_id: int, image_ids: list[str]
    ) -> JobDict:
        """Validate the images, create a pre-cache job and start it; returns the queued job.

        :raises ImageNotFound, ImageNotAvailable: before any host is asked.
        :raises AggregateNotFound:
        """
        cctxt = self._prepare()
        return cctxt.call(  # type: ignore[no-any-return]
            ctxt, "cache_images", aggregate_id=aggregate_id, image_ids=image_ids
        )
