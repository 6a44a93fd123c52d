"""The conductor's RPC endpoint (topic ``conductor``): service registry and heartbeats, pre-cache
requests, and the computes' image cache reports.

The conductor serves the same API on the default transport and on every cell's transport
(:mod:`fleetcache.conductor.cells`). Each transport gets its own :class:`ConductorManager`
that knows the cell it serves, so a compute that registers through its cell's broker is mapped
to that cell: the broker a message came through *is* the compute's cell.

Registration and heartbeats of computes also keep their Placement resource providers in step
(:mod:`fleetcache.conductor.placement`): a registration writes the provider (created, updated
only where it differs); a heartbeat of a compute whose provider is not yet in step (Placement
was unreachable) tries again. The API's aggregate host changes arrive as
``sync_host_aggregates`` casts and are mirrored into the provider's Placement aggregates.

State every endpoint shares (the database, the cell transports, the two pools of pre-cache
jobs, the notifier, the Placement client) lives in one :class:`ConductorState`, built once per
conductor process at start-up from its configuration
(``fleetcache.cmd.conductor.build_service``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import futurist
import oslo_messaging as messaging
from oslo_config import cfg
from oslo_utils import netutils
from prometheus_client import CollectorRegistry

from fleetcache.common import binaries, exception, rpc
from fleetcache.common.context import RequestContext
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import host_images
from fleetcache.common.db import services as db_services
from fleetcache.common.db.jobs import JobDict
from fleetcache.common.db.session import Database
from fleetcache.conductor import build, rpcapi
from fleetcache.conductor.cells import CellTransports
from fleetcache.conductor.metrics import ConductorMetrics, JobStateCollector
from fleetcache.conductor.placement import PlacementClient, ProviderSync
from fleetcache.conductor.precache import (
    CacheNotifier,
    CatchUp,
    DownloadGate,
    HostCallPool,
    JobOwner,
    JobTakeover,
    JobWindows,
    PeerQuarantine,
    Precacher,
)
from fleetcache.conductor.scheduler import Scheduler
from fleetcache.conductor.scheduler.image_support import ImageTypeSupport
from fleetcache.image.source import ImageSource

LOG = logging.getLogger(__name__)


class ConductorState:
    """What every :class:`ConductorManager` of one process shares, built from ``conf`` at
    start-up; :meth:`shutdown` stops its pools when the conductor stops.

    :param transports: the conductor's transports (it cleans them up itself, after
        :meth:`shutdown`).
    :param images: the image source; default ``[image_source] backend``, loaded on first use.
    :param registry: where the conductor's metrics are registered (the exporter's); default a
        registry of its own that nobody serves.
    :ivar cells: the transports of the default broker and every cell, and compute RPC clients
        into them (``cells.compute_api(cell)``).
    :ivar host_calls: the pool every job calls computes from, ``[image_cache]
        precache_concurrency`` workers, so that the limit holds across jobs.
    :ivar job_coordinators: the pool a job's coordinator runs on after ``cache_images`` has
        returned the queued job, ``[conductor] max_concurrent_jobs`` workers; a job beyond
        that waits ``queued``.
    :ivar gate: the image service's download slots, shared with every other conductor
        through the database (``[image_cache] max_concurrent_downloads*``).
    :ivar precacher: starts pre-cache jobs on these pools.
    :ivar owner: this process as the owner of its jobs (a new id per start).
    :ivar takeover: renews this process's job leases and takes over jobs whose conductor died.
    :ivar catch_up: asks the pending hosts of this process's jobs when they come back.
    :ivar windows: starts this process's scheduled jobs when their window opens.
    :ivar providers: keeps computes' Placement resource providers in step; ``None`` when
        ``[placement]`` is not configured (no compute is then schedulable).
    :ivar scheduler: places instances (``select_destinations``); ``None`` without
        ``[placement]``. Built here so that a bad ``[filter_scheduler]`` stops the conductor
        at start-up.
    :ivar builder: builds, rebuilds and deletes instances (:mod:`fleetcache.conductor.build`)
        with that scheduler.
    """

    def __init__(
        self,
        conf: cfg.ConfigOpts,
        db: Database,
        transports: rpc.Transports,
        images: ImageSource | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.conf = conf
        self.db = db
        self.registry = registry if registry is not None else CollectorRegistry()
        self.registry.register(JobStateCollector(db))
        self.metrics = ConductorMetrics(self.registry)
        self.cells = CellTransports(conf, db, transports)
        self.host_calls = HostCallPool(conf.image_cache.precache_concurrency, name="precache")
        self.job_coordinators = futurist.ThreadPoolExecutor(
            max_workers=conf.conductor.max_concurrent_jobs)
        self.gate = DownloadGate.from_conf(conf, db)
        notifier = rpc.get_notifier(transports.notification(),
                                    publisher_id=f"{binaries.CONDUCTOR}:{conf.host}")
        client = PlacementClient.from_conf(conf)
        self.owner = JobOwner.from_conf(conf)
        self.precacher = Precacher(
            conf, db, conf.host, clients=self.cells,
            notifier=CacheNotifier(notifier),
            host_calls=self.host_calls, job_runner=self.job_coordinators.submit, images=images,
            gate=self.gate,
            image_support=self._image_support(conf, client),
            metrics=self.metrics,
            owner=self.owner,
            quarantine=(PeerQuarantine(conf.image_cache.peer_quarantine_time)
                        if conf.image_cache.peer_distribution else None),
        )
        self.takeover = JobTakeover(self.precacher, self.owner)
        self.catch_up = CatchUp(self.precacher, self.owner)
        self.windows = JobWindows(self.precacher, self.owner)
        self.providers = (ProviderSync(client, conf.placement.generation_conflict_retries)
                          if client is not None else None)
        if self.providers is None:
            LOG.warning("[placement] auth_type is not set: no compute will be reported to "
                        "Placement, so none is schedulable")
        try:
            self.scheduler = self._build_scheduler(conf, db, client)
        except BaseException:
            self.shutdown()
            raise
        self.builder = build.InstanceBuilder(conf, db, self.cells, self.scheduler,
                                             images=lambda: self.precacher.images)

    @staticmethod
    def _image_support(
        conf: cfg.ConfigOpts, client: PlacementClient | None
    ) -> ImageTypeSupport | None:
        """What lets a pre-cache job mark hosts without an image's format trait
        ``unsupported`` (the image-type request filter's rule), when both are on."""
        if client is None or not conf.scheduler.filter_hosts_by_image_type_support:
            return None
        return ImageTypeSupport(client)

    @staticmethod
    def _build_scheduler(
        conf: cfg.ConfigOpts, db: Database, client: PlacementClient | None
    ) -> Scheduler | None:
        """:raises InvalidConfiguration: an unknown host filter or weigher."""
        return Scheduler(conf, db, client) if client is not None else None

    def shutdown(self, wait: bool = False) -> None:
        """Stop both pools: queued host calls are dropped, and each running job stores the
        results it has and releases its lease, so that another conductor (or this host's next
        one) takes it over and asks its remaining hosts; if the process dies first, the lease
        expires instead (:mod:`fleetcache.conductor.precache.takeover`).

        :param wait: return only once every job's coordinator has ended.
        """
        self.gate.stop()
        self.host_calls.shutdown(wait=False, cancel_futures=True)
        self.job_coordinators.shutdown(wait=wait)


class ConductorManager:
    """Serves the conductor RPC API for one transport.

    :param state: shared by every endpoint of the process.
    :param cell: the cell whose transport this endpoint listens on; ``None`` for the default
        transport when that is no cell's.
    """

    RPC_API_VERSION = rpcapi.RPC_API_VERSION
    target = messaging.Target(version=RPC_API_VERSION)

    def __init__(self, state: ConductorState, cell: db_cells.CellDict | None = None) -> None:
        self.state = state
        self.conf = state.conf
        self.db = state.db
        self.cell = cell

    @property
    def cell_name(self) -> str:
        return self.cell["name"] if self.cell is not None else "(no cell)"

    @rpc.expected_exceptions(exception.Invalid)
    def register_service(
        self,
        ctxt: RequestContext,
        host: str,
        binary: str,
        topic: str,
        capabilities: dict[str, Any],
        host_ip: str | None = None,
    ) -> db_services.ServiceDict:
        """Create or refresh a service record, mapped to the cell this endpoint serves.

        :param host_ip: the service's address (1.6); a malformed one is not recorded (the API
            shows only addresses).
        :returns: the service record.
        :raises InvalidInput: when ``host`` or ``binary`` is empty.
        """
        if not host or not binary:
            raise exception.InvalidInput(reason="register_service needs a host and a binary")
        if host_ip is not None and not netutils.is_valid_ip(host_ip):
            LOG.warning("%s on %s reported %r as its address, which is none: not recorded",
                        binary, host, host_ip[:64])
            host_ip = None
        cell_id = self.cell["id"] if self.cell is not None else None
        service = db_services.service_register(
            self.db, host, binary, topic, cell_id, capabilities=capabilities, host_ip=host_ip
        )
        LOG.info("Registered %s on %s in cell %s", binary, host, self.cell_name)
        self._sync_provider(service)
        self.state.catch_up.host_seen(service)
        return service

    @rpc.expected_exceptions(exception.ComputeHostNotFound)
    def service_heartbeat(
        self,
        ctxt: RequestContext,
        host: str,
        binary: str,
        capabilities: dict[str, Any] | None = None,
    ) -> None:
        """Record that a service is alive (and what it can do, when given).

        :raises ComputeHostNotFound: when the service never registered or was deleted; the
            service then registers again.
        """
        service = db_services.service_heartbeat(self.db, host, binary, capabilities=capabilities)
        if service["placement_synced_at"] is None:
            self._sync_provider(service)
        self.state.catch_up.host_seen(service)

    def _sync_provider(self, service: db_services.ServiceDict) -> None:
        """Bring a compute's resource provider in step with its registration; a failure is
        logged and the compute stays unschedulable until a later heartbeat succeeds."""
        providers = self.state.providers
        if providers is None or service["binary"] != binaries.COMPUTE:
            return
        host = service["host"]
        try:
            providers.sync(host, service["capabilities"], self._aggregates_of(host))
        except exception.PlacementError as exc:
            LOG.warning("Compute %s is not schedulable yet: %s", host, exc)
            return
        db_services.service_placement_synced(self.db, host, service["binary"],
                                             service["capabilities"])

    def _aggregates_of(self, host: str) -> Callable[[], set[str]]:
        """What reads the uuids of ``host``'s aggregates, for the provider sync to read after
        the provider's generation (:meth:`ProviderSync.sync_aggregates`)."""
        return lambda: db_aggregates.aggregate_uuids_by_host(self.db, [host])[host]

    def sync_host_aggregates(self, ctxt: RequestContext, host: str) -> None:
        """Mirror the fleetcache aggregates ``host`` is in into its provider's Placement
        aggregates (a cast from the API after ``add_host`` / ``remove_host``). A failure is
        logged: ``fleetcache-manage placement sync-aggregates`` repairs what it left, and the
        compute's next registration writes its aggregates too. A host added to an aggregate
        becomes pending in the aggregate's jobs whose catch-up window is open."""
        try:
            self.state.catch_up.host_added(host)
        except Exception:
            LOG.exception("Could not add %s to the open pre-cache jobs of its aggregates", host)
        providers = self.state.providers
        if providers is None:
            return
        try:
            providers.sync_aggregates(host, self._aggregates_of(host))
        except exception.PlacementError as exc:
            LOG.warning("Placement aggregates of %s not updated: %s", host, exc)

    # -- pre-cache --------------------------------------------------------------------------

    @rpc.expected_exceptions(exception.Invalid, exception.NotFound, exception.ImageFetchError)
    def cache_images(
        self, ctxt: RequestContext, aggregate_id: int, image_ids: list[str],
        pin_seconds: int | None = None, terms: dict[str, Any] | None = None,
    ) -> JobDict:
        """Validate the images, create a pre-cache job on the aggregate and start it.

        :param pin_seconds: keep the images on the hosts at least this long from now (1.4).
        :param terms: the job's terms (``fleetcache.common.job_terms.JobTerms``, 1.7), as the
            API checked them.
        :returns: the job, ``queued``; it runs on after this call returns
            (:mod:`fleetcache.conductor.precache.job`).
        :raises InvalidInput: when no image is given.
        :raises AggregateNotFound:
        :raises ImageNotFound, ImageNotAvailable, ImageFetchError: before any host is asked.
        """
        if not image_ids:
            raise exception.InvalidInput(reason="cache_images needs at least one image")
        if pin_seconds is not None and (not isinstance(pin_seconds, int) or pin_seconds < 1):
            raise exception.InvalidInput(reason=f"bad pin_seconds {pin_seconds!r}")
        return self.state.precacher.start(ctxt, int(aggregate_id), list(image_ids),
                                          pin_seconds=pin_seconds, terms=terms)

    # -- the boot path -----------------------------------------------------------------------

    def build_instances(
        self, ctxt: RequestContext, instance_uuids: list[str], min_count: int = 1
    ) -> None:
        """Schedule and build instances the API created (a cast; each instance's state says
        how it ended)."""
        self.state.builder.build(ctxt, list(instance_uuids), int(min_count))

    def rebuild_instance(self, ctxt: RequestContext, instance_uuid: str) -> None:
        """Rebuild an instance from its new image on its host (a cast)."""
        self.state.builder.rebuild(ctxt, instance_uuid)

    def delete_instance(self, ctxt: RequestContext, instance_uuid: str) -> None:
        """Remove an instance's disk and allocation and mark it deleted (a cast)."""
        self.state.builder.delete(ctxt, instance_uuid)

    # -- image cache reports ----------------------------------------------------------------

    @rpc.expected_exceptions(exception.Invalid)
    def report_image_cache(
        self,
        ctxt: RequestContext,
        host: str,
        images: list[host_images.ReportedImage],
        usage_bytes: int,
        reported_at: float | None = None,
    ) -> None:
        """Store ``host``'s image cache report, replacing its previous one (a cast).

        :raises InvalidInput: for a malformed report (logged here: a cast has no caller).
        """
        stored = host_images.set_host_images(self.db, host, images, usage_bytes, reported_at)
        LOG.debug("Image cache of %s: %d image(s), %d bytes%s", host, len(images), usage_bytes,
                  "" if stored else " (older than the stored report; dropped)")
