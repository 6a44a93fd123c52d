"""Client side of the conductor RPC API (topic ``conductor``).

Used by the API (pre-cache requests; server builds, rebuilds and deletes) and by every
service for registration and heartbeats, which is how compute agents stay free of database
credentials.

API version history:

* 1.0 - Initial version: register_service, service_heartbeat, cache_images
* 1.1 - Added report_image_cache
* 1.2 - Added sync_host_aggregates
* 1.3 - Added build_instances, rebuild_instance, delete_instance
* 1.4 - cache_images takes pin_seconds
* 1.5 - report_image_cache images may carry pinned_until
* 1.6 - register_service takes host_ip
* 1.7 - cache_images takes terms
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import oslo_messaging as messaging
from oslo_config import cfg

from fleetcache.common import rpc
from fleetcache.common.context import RequestContext
from fleetcache.common.db.host_images import ReportedImage
from fleetcache.common.db.jobs import JobDict
from fleetcache.common.db.services import ServiceDict

TOPIC = "conductor"
RPC_API_VERSION = "1.7"


class ConductorAPI:
    """Calls into a conductor over ``transport`` (the caller's
    :class:`~fleetcache.common.rpc.Transports`, usually ``get()``: ``[DEFAULT] transport_url``).

    The version cap is ``[upgrade_levels] conductor`` when set, else :data:`RPC_API_VERSION`.
    """

    def __init__(self, conf: cfg.ConfigOpts, transport: messaging.Transport) -> None:
        self.conf = conf
        self.version_cap: str = conf.upgrade_levels.conductor or RPC_API_VERSION
        self.client = rpc.get_client(transport, TOPIC, version_cap=self.version_cap)

    def _prepare(self, method: str, version: str = "1.0", **kwargs: Any) -> Any:
        """:func:`rpc.prepare` with ``[DEFAULT] rpc_send_retries`` unless told otherwise."""
        kwargs.setdefault("retry", self.conf.rpc_send_retries)
        return rpc.prepare(self.client, method, version, **kwargs)

    def register_service(
        self,
        ctxt: RequestContext,
        host: str,
        binary: str,
        topic: str,
        capabilities: dict[str, Any],
        host_ip: str | None = None,
    ) -> ServiceDict:
        """Create or refresh the service record; the conductor maps it to the caller's cell.

        :param host_ip: the service's address (a compute's ``[DEFAULT] my_ip``), sent at 1.6;
            a client capped below 1.6 registers at 1.0 without it (the record then has none).
        """
        kwargs: dict[str, Any] = {"host": host, "binary": binary, "topic": topic,
                                  "capabilities": capabilities}
        version = "1.0"
        if host_ip is not None and self.client.can_send_version("1.6"):
            kwargs["host_ip"], version = host_ip, "1.6"
        cctxt = self._prepare("register_service", version)
        return cctxt.call(ctxt, "register_service", **kwargs)  # type: ignore[no-any-return]

    def service_heartbeat(
        self,
        ctxt: RequestContext,
        host: str,
        binary: str,
        capabilities: dict[str, Any] | None = None,
    ) -> None:
        """Report that the service is alive (and, optionally, what it can do now)."""
        # A heartbeat older than report_interval is worthless: never wait longer than that.
        cctxt = self._prepare("service_heartbeat", timeout=self.conf.report_interval)
        cctxt.call(ctxt, "service_heartbeat", host=host, binary=binary, capabilities=capabilities)

    def cache_images(
        self, ctxt: RequestContext, aggregate_id: int, image_ids: list[str],
        pin_seconds: int | None = None, terms: Mapping[str, Any] | None = None,
    ) -> JobDict:
        """Validate the images, create a pre-cache job and start it; returns the queued job.

        :param pin_seconds: pin the images on the hosts for this long (version 1.4).
        :param terms: the job's terms (``fleetcache.common.job_terms.JobTerms``, checked by
            the caller), sent at 1.7 when not empty.
        :raises ImageNotFound, ImageNotAvailable: before any host is asked.
        :raises AggregateNotFound:
        :raises RPCVersionCapped: a pin with ``[upgrade_levels] conductor`` below 1.4, terms
            with it below 1.7 (a conductor that would ignore them must not get the job).
        """
        kwargs: dict[str, Any] = {"aggregate_id": aggregate_id, "image_ids": image_ids}
        version = "1.0"
        if pin_seconds is not None:
            kwargs["pin_seconds"], version = pin_seconds, "1.4"
        if terms:
            kwargs["terms"], version = dict(terms), "1.7"
        cctxt = self._prepare("cache_images", version)
        return cctxt.call(ctxt, "cache_images", **kwargs)  # type: ignore[no-any-return]

    def report_image_cache(
        self,
        ctxt: RequestContext,
        host: str,
        images: list[ReportedImage],
        usage_bytes: int,
        reported_at: float | None = None,
    ) -> None:
        """Report everything ``host``'s image cache holds (a cast: nothing comes back).

        :param images: ``{"image_id", "size" (bytes), "last_used" (epoch s)}`` each, plus
            ``"pinned_until"`` (epoch s) for a pinned image. A report with a pin is sent at
            1.5; a client capped below 1.5 sends it at 1.1 without the pins, so a conductor
            that predates them still gets the cache's contents.
        :param usage_bytes: disk bytes the whole cache takes.
        :param reported_at: when the report was built (epoch s); an older report than the one
            the conductor holds is dropped. Default: now.
        :raises RPCVersionCapped: when ``[upgrade_levels] conductor`` is below 1.1.
        """
        version = "1.1"
        if any("pinned_until" in image for image in images):
            if self.client.can_send_version("1.5"):
                version = "1.5"
            else:
                images = [ReportedImage(image_id=i["image_id"], size=i["size"],
                                        last_used=i["last_used"]) for i in images]
        # NOTE: best effort: a lost report is replaced by the next one, so it is not retried.
        cctxt = self._prepare("report_image_cache", version, retry=0)
        cctxt.cast(ctxt, "report_image_cache", host=host, images=images,
                   usage_bytes=usage_bytes,
                   reported_at=time.time() if reported_at is None else reported_at)

    def sync_host_aggregates(self, ctxt: RequestContext, host: str) -> None:
        """Have the conductor mirror ``host``'s aggregates into Placement (a cast).

        :raises RPCVersionCapped: when ``[upgrade_levels] conductor`` is below 1.2.
        """
        cctxt = self._prepare("sync_host_aggregates", "1.2")
        cctxt.cast(ctxt, "sync_host_aggregates", host=host)

    # -- the boot path: casts; the instances' states say how each ended ------------------------

    def build_instances(
        self, ctxt: RequestContext, instance_uuids: list[str], min_count: int = 1
    ) -> None:
        """Schedule the instances (created ``building`` by the API) and build their disks.

        :raises RPCVersionCapped: when ``[upgrade_levels] conductor`` is below 1.3.
        """
        cctxt = self._prepare("build_instances", "1.3")
        cctxt.cast(ctxt, "build_instances", instance_uuids=instance_uuids, min_count=min_count)

    def rebuild_instance(self, ctxt: RequestContext, instance_uuid: str) -> None:
        """Rebuild the instance (marked ``rebuilding`` by the API) from its new image.

        :raises RPCVersionCapped: when ``[upgrade_levels] conductor`` is below 1.3.
        """
        cctxt = self._prepare("rebuild_instance", "1.3")
        cctxt.cast(ctxt, "rebuild_instance", instance_uuid=instance_uuid)

    def delete_instance(self, ctxt: RequestContext, instance_uuid: str) -> None:
        """Remove the instance's disk and allocation, then mark it deleted.

        :raises RPCVersionCapped: when ``[upgrade_levels] conductor`` is below 1.3.
        """
        cctxt = self._prepare("delete_instance", "1.3")
        cctxt.cast(ctxt, "delete_instance", instance_uuid=instance_uuid)
