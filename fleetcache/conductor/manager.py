"""The conductor's RPC endpoint (topic ``conductor``): service registry and heartbeats, pre-cache
requests, and the computes' image cache reports.

The conductor serves the same API on the default transport and on every cell's transport
(:mod:`fleetcache.conductor.cells`). Each transport gets its own :class:`ConductorManager`
that knows the cell it serves, so a compute that registers through its cell's broker is mapped
to that cell: the broker a message came through *is* the compute's cell.

State every endpoint shares (the database, the cell transports, one pool for background
jobs) lives in one :class:`ConductorState`, built once per conductor process.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import futurist
import oslo_messaging as messaging
from oslo_config import cfg

from fleetcache.common import exception, rpc
from fleetcache.common.context import RequestContext
from fleetcache.common.db import api as db_api
from fleetcache.common.db import host_images
from fleetcache.common.db.jobs import JobDict
from fleetcache.common.db.session import Database
from fleetcache.conductor import precache, rpcapi
from fleetcache.conductor.cells import CellTransports

LOG = logging.getLogger(__name__)

#: Pre-cache jobs running at once in one conductor; each fans out to many hosts itself.
MAX_CONCURRENT_JOBS = 4


class ConductorState:
    """What every :class:`ConductorManager` of one process shares.

    :ivar cells: the transports of the default broker and every cell, and compute RPC clients
        into them (``cells.compute_api(cell)``).
    :ivar executor: a small pool for work that outlives the RPC call starting it (a pre-cache
        job runs here after ``cache_images`` has returned the queued job).
    """

    def __init__(self, conf: cfg.ConfigOpts, db: Database) -> None:
        self.conf = conf
        self.db = db
        self.cells = CellTransports(conf, db)
        self._executor: futurist.ThreadPoolExecutor | None = None
        self._precacher: precache.Precacher | None = None
        self._lock = threading.Lock()

    @property
    def executor(self) -> futurist.ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = futurist.ThreadPoolExecutor(max_workers=MAX_CONCURRENT_JOBS)
            return self._executor

    @property
    def precacher(self) -> precache.Precacher:
        """Starts pre-cache jobs; each job's coordinator runs on :attr:`executor`."""
        with self._lock:
            if self._precacher is None:
                self._precacher = precache.Precacher(
                    self.conf, self.db, self.conf.host, clients=self.cells,
                    job_runner=lambda run: self.executor.submit(run),
                )
            return self._precacher

    def shutdown(self, wait: bool = False) -> None:
        """Stop accepting background work; running jobs are failed as ``interrupted`` by the
        next conductor start on this host if the process dies before they end."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait)
        precache.shutdown_executors()


class ConductorManager:
    """Serves the conductor RPC API for one transport.

    :param cell: the cell whose transport this endpoint listens on; ``None`` for the default
        transport when that is no cell's.
    :param state: shared by every endpoint of the process; built from ``conf`` and ``db``
        when not given (unit tests).
    """

    RPC_API_VERSION = rpcapi.RPC_API_VERSION
    target = messaging.Target(version=RPC_API_VERSION)

    def __init__(
        self,
        conf: cfg.ConfigOpts,
        db: Database,
        cell: db_api.CellDict | None = None,
        state: ConductorState | None = None,
    ) -> None:
        self.conf = conf
        self.db = db
        self.cell = cell
        self.state = state if state is not None else ConductorState(conf, db)

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
    ) -> db_api.ServiceDict:
        """Create or refresh a service record, mapped to the cell this endpoint serves.

        :returns: the service record.
        :raises InvalidInput: when ``host`` or ``binary`` is empty.
        """
        if not host or not binary:
            raise exception.InvalidInput(reason="register_service needs a host and a binary")
        cell_id = self.cell["id"] if self.cell is not None else None
        service = db_api.service_register(
            self.db, host, binary, topic, cell_id, capabilities=capabilities
        )
        LOG.info("Registered %s on %s in cell %s", binary, host, self.cell_name)
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
        db_api.service_heartbeat(self.db, host, binary, capabilities=capabilities)

    # -- pre-cache --------------------------------------------------------------------------

    @rpc.expected_exceptions(exception.Invalid, exception.NotFound, exception.ImageFetchError)
    def cache_images(
        self, ctxt: RequestContext, aggregate_id: int, image_ids: list[str]
    ) -> JobDict:
        """Validate the images, create a pre-cache job on the aggregate and start it.

        :returns: the job, ``queued``; it runs on after this call returns
            (:mod:`fleetcache.conductor.precache`).
        :raises InvalidInput: when no image is given.
        :raises AggregateNotFound:
        :raises ImageNotFound, ImageNotAvailable, ImageFetchError: before any host is asked.
        """
        if not image_ids:
            raise exception.InvalidInput(reason="cache_images needs at least one image")
        return self.state.precacher.start(ctxt, int(aggregate_id), list(image_ids))

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
