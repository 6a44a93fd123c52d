"""``fleetcache-compute``: the compute agent daemon of one host.

Loads the virt driver, prepares the host, serves topic ``compute`` (server = ``[DEFAULT]
host``) on ``[DEFAULT] transport_url`` (its cell's broker), and registers and heartbeats
through the conductor. It holds no database credentials: everything it reports goes over RPC.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from oslo_config import cfg

from fleetcache.cmd import common
from fleetcache.common import exception, rpc
from fleetcache.common.context import RequestContext
from fleetcache.common.service import Service, ServiceReporter
from fleetcache.compute import rpcapi as compute_rpcapi
from fleetcache.compute.manager import ComputeManager
from fleetcache.compute.virt import driver as virt_driver
from fleetcache.conductor.rpcapi import ConductorAPI

LOG = logging.getLogger(__name__)

BINARY = "fleetcache-compute"
#: Worker threads of the compute's RPC server, i.e. RPC calls it runs at once. A
#: ``cache_images`` call holds its worker for a whole download, and one conductor job sends one
#: call per host, so a few workers serve several concurrent jobs; more only add idle threads,
#: which the threading executor never releases (research/runtime-probe.md, P3).
EXECUTOR_THREAD_POOL_SIZE = 8


def build_service(conf: cfg.ConfigOpts) -> Service:
    """Assemble the compute agent: driver, RPC server and the reporter.

    :raises InvalidConfiguration: when the driver is unknown or the host cannot run it.
    """
    _warn_database_settings(conf)
    driver = virt_driver.load_compute_driver(conf)
    driver.init_host(conf.host)
    transport = rpc.get_transport(conf)
    service = Service(BINARY)
    server = rpc.get_server(
        transport, compute_rpcapi.TOPIC, conf.host, [ComputeManager(conf, driver)]
    )
    service.add_server(compute_rpcapi.TOPIC, server)
    reporter = make_reporter(conf, ConductorAPI(conf, transport), driver)
    service.add_periodic("report", reporter.run_once, conf.report_interval)
    return service


def make_reporter(
    conf: cfg.ConfigOpts, conductor: ConductorAPI, driver: virt_driver.ComputeDriver
) -> ServiceReporter:
    """Registration (with the driver's capabilities) and heartbeats through the conductor.

    Each call carries a fresh request id, so that its log lines on both sides match up.
    """

    def _context() -> RequestContext:
        return RequestContext(is_admin=True, roles=["admin"], overwrite=True)

    def register() -> None:
        service = conductor.register_service(
            _context(), conf.host, BINARY, compute_rpcapi.TOPIC, driver.get_capabilities()
        )
        cell = service.get("cell") if isinstance(service, dict) else None
        LOG.info("Registered with the conductor as %s on %s (cell %s)", BINARY, conf.host,
                 cell["name"] if cell else "none")

    def heartbeat() -> None:
        conductor.service_heartbeat(_context(), conf.host, BINARY)

    return ServiceReporter(
        f"{BINARY} on {conf.host}",
        register=register,
        heartbeat=heartbeat,
        interval=conf.report_interval,
        unknown=(exception.ComputeHostNotFound,),
    )


def _warn_database_settings(conf: cfg.ConfigOpts) -> None:
    location = conf.get_location("connection", "database")
    if location is not None and location.location != cfg.Locations.opt_default:
        LOG.warning("[database] connection is set in %s but a compute never uses the database; "
                    "remove it so this host holds no database credentials", location.detail)


def main(argv: Sequence[str] | None = None, conf: cfg.ConfigOpts | None = None) -> int:
    conf = common.parse_config(
        argv, BINARY, conf=conf,
        defaults={"executor_thread_pool_size": EXECUTOR_THREAD_POOL_SIZE},
    )
    try:
        service = build_service(conf)
    except exception.InvalidConfiguration as exc:
        common.config_error(BINARY, str(exc))
    except common.TRANSPORT_URL_ERRORS as exc:
        common.config_error(BINARY, f"invalid value for option [DEFAULT] transport_url: {exc}")
    try:
        return service.run()
    finally:
        rpc.cleanup()


if __name__ == "__main__":
    sys.exit(main())
