"""``fleetcache-conductor``: the conductor daemon.

Serves topic ``conductor`` on the default transport and on every cell's (new cells are picked
up every ``[conductor] cell_refresh_interval``), registers itself as ``fleetcache-conductor``
and heartbeats straight into the database. It renews the leases of its pre-cache jobs, takes
over jobs whose conductor died (at start-up, those of its own host's previous process at
once), catches up pending hosts and starts the jobs whose window opened
(:mod:`fleetcache.conductor.precache.takeover`, :mod:`fleetcache.conductor.precache.catchup`,
:mod:`fleetcache.conductor.precache.windows`). On start it fails the instance builds a previous
conductor on this host left unfinished (then, periodically, the builds of conductors that
died).

``main`` builds what the process owns at start-up and passes it in: the transports
(:class:`~fleetcache.common.rpc.Transports`) and, in :func:`build_service`, the
:class:`~fleetcache.conductor.manager.ConductorState` with the pre-cache pools. On stop it
shuts the pools down, then closes the transports.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from oslo_config import cfg
from prometheus_client import CollectorRegistry

from fleetcache.cmd import common, heap
from fleetcache.common import binaries, exception, metrics, rpc
from fleetcache.common.db import services as db_services
from fleetcache.common.db.cells import CellDict
from fleetcache.common.db.session import Database
from fleetcache.common.service import Service, ServiceReporter
from fleetcache.conductor import build, rpcapi
from fleetcache.conductor.cells import CellListeners
from fleetcache.conductor.manager import ConductorManager, ConductorState

LOG = logging.getLogger(__name__)

BINARY = binaries.CONDUCTOR
#: Worker threads per RPC server (one server per cell transport). Every registration and
#: heartbeat of a cell's computes lands here as a short database write; 32 keeps up with
#: thousands of computes while bounding the threads: oslo.messaging's threading executor
#: keeps every worker it ever started, and one process at 3,000-4,000 threads was measured
#: (2 vCPUs) to fall into a GIL convoy that missed AMQP heartbeats.
EXECUTOR_THREAD_POOL_SIZE = 32


def build_service(
    conf: cfg.ConfigOpts, db: Database, transports: rpc.Transports,
    registry: CollectorRegistry | None = None,
) -> tuple[Service, ConductorState]:
    """Assemble the conductor: its shared state and pools, RPC servers, cell refresh and
    self-reporting, its metrics in ``registry``. The caller stops the service, then shuts the
    state down."""
    build.fail_orphaned(db, conf, restarted=True)
    state = ConductorState(conf, db, transports, registry=registry)
    service = Service(BINARY)

    def make_endpoint(cell: CellDict | None) -> ConductorManager:
        return ConductorManager(state, cell=cell)

    listeners = CellListeners(state.cells, service, make_endpoint, topic=rpcapi.TOPIC)
    try:
        listeners.refresh(strict=True)
    except BaseException:
        state.shutdown()
        raise
    interval = conf.conductor.cell_refresh_interval
    service.add_periodic("cell-refresh", listeners.refresh, interval, initial_delay=interval)
    reporter = ServiceReporter(
        f"{BINARY} on {conf.host}",
        register=lambda: db_services.service_register(db, conf.host, BINARY, rpcapi.TOPIC, None,
                                                      {}),
        heartbeat=lambda: db_services.service_heartbeat(db, conf.host, BINARY),
        interval=conf.report_interval,
        unknown=(exception.ComputeHostNotFound,),
    )
    service.add_periodic("report", reporter.run_once, conf.report_interval)
    # Instances whose conductor died end in error within service_down_time plus this.
    service.add_periodic("orphaned-instances", lambda: _fail_orphaned(db, conf),
                         conf.service_down_time, initial_delay=conf.service_down_time)
    lease_time = conf.conductor.job_lease_time
    service.add_periodic("job-lease-renew", state.takeover.renew, lease_time / 3.0,
                         initial_delay=lease_time / 3.0)
    # The first run (at start) also takes over this host's previous conductor's jobs.
    service.add_periodic("job-takeover", state.takeover.run_once,
                         conf.conductor.job_takeover_interval)
    service.add_periodic("catch-up", state.catch_up.sweep, conf.image_cache.catch_up_interval)
    service.add_periodic("job-windows", state.windows.run_once,
                         conf.conductor.job_window_interval)
    return service, state


def _fail_orphaned(db: Database, conf: cfg.ConfigOpts) -> None:
    build.fail_orphaned(db, conf)


def main(argv: Sequence[str] | None = None, conf: cfg.ConfigOpts | None = None) -> int:
    conf = common.parse_config(
        argv, BINARY, conf=conf,
        defaults={"executor_thread_pool_size": EXECUTOR_THREAD_POOL_SIZE},
    )
    db = common.open_database(conf, BINARY)
    transports = rpc.Transports(conf)
    registry = CollectorRegistry()
    state: ConductorState | None = None
    exporter: metrics.Exporter | None = None
    try:
        common.check_transports(transports, BINARY)
        try:
            service, state = build_service(conf, db, transports, registry)
            exporter = metrics.start_exporter(
                conf.metrics.bind_host, conf.metrics.conductor_port, registry, BINARY)
        except exception.InvalidConfiguration as exc:  # e.g. an unknown enabled filter
            common.config_error(BINARY, str(exc))
        LOG.debug("%d start-up objects exempted from garbage collection",
                  heap.freeze_startup_heap())
        return service.run()
    finally:
        if exporter is not None:
            exporter.stop()
        if state is not None:
            state.shutdown()
        transports.cleanup()
        db.dispose()


if __name__ == "__main__":
    sys.exit(main())
