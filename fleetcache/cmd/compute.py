"""``fleetcache-compute``: the compute agent daemon of one host.

Loads the virt driver, prepares the host, serves topic ``compute`` (server = ``[DEFAULT]
host``) on ``[DEFAULT] transport_url`` (its cell's broker), and registers and heartbeats
through the conductor. It holds no database credentials: everything it reports goes over RPC.

``fleetcache-compute --config-file F --check-config`` only validates the configuration (see
:mod:`fleetcache.compute.config_check`): it prints every problem naming the option and the
rule, and exits 0 when there is no error (warnings allowed), else 1.
"""

from __future__ import annotations

import ipaddress
import logging
import sys
from collections.abc import Sequence

from oslo_config import cfg
from prometheus_client import CollectorRegistry

from fleetcache import privsep
from fleetcache.cmd import common
from fleetcache.common import binaries, exception, metrics, rpc
from fleetcache.common.context import RequestContext, get_admin_context
from fleetcache.common.service import Service, ServiceReporter
from fleetcache.compute import config_check, long_calls, resources
from fleetcache.compute import rpcapi as compute_rpcapi
from fleetcache.compute.imagecache import CachedImage, ReportFunc
from fleetcache.compute.manager import ComputeManager
from fleetcache.compute.metrics import ComputeMetrics, ImageCacheCollector
from fleetcache.compute.peers import PeerServer, ServeGrants
from fleetcache.compute.peers import tls as peer_tls
from fleetcache.compute.virt import driver as virt_driver
from fleetcache.conductor.rpcapi import ConductorAPI

LOG = logging.getLogger(__name__)

BINARY = binaries.COMPUTE
#: Worker threads of the compute's RPC server, i.e. RPC calls it runs at once. A long call
#: (``cache_images``) holds its worker for a whole download, so the default leaves room for
#: ``[compute] max_concurrent_long_calls`` (24) of them plus 8 workers that always answer short
#: calls and refuse a long call over the limit at once (:mod:`fleetcache.compute.long_calls`).
#: Not more: futurist's pool behind oslo.messaging's threading executor keeps every thread it
#: ever started until the server stops.
EXECUTOR_THREAD_POOL_SIZE = 32

CHECK_CONFIG_OPT = cfg.BoolOpt(
    "check-config",
    default=False,
    help="Validate the configuration, print every problem (option and rule) and exit: 0 when "
    "it has no error, else 1. A disk backend whose tools this host lacks is only a warning.",
)


def build_service(conf: cfg.ConfigOpts, transports: rpc.Transports,
                  registry: CollectorRegistry | None = None) -> Service:
    """Assemble the compute agent: driver, RPC server and the reporter, on ``transports``
    (the caller cleans them up once the service has stopped).

    :param registry: where the compute's metrics are registered (the exporter's); default a
        registry of its own that nobody serves.
    :raises InvalidConfiguration: when the driver is unknown or the host cannot run it.
    """
    _warn_database_settings(conf)
    slots = long_calls.LongCallSlots(long_calls.effective_limit(conf), conf.host)
    if (lowered := long_calls.limit_problem(conf)) is not None:
        LOG.warning("%s", lowered)
    privsep.configure(conf)
    driver = virt_driver.load_compute_driver(conf)
    driver.init_host(conf.host)
    transport = transports.get()
    service = Service(BINARY)
    conductor = ConductorAPI(conf, transport)
    registry = registry if registry is not None else CollectorRegistry()
    if driver.image_cache is not None:
        registry.register(ImageCacheCollector(driver.image_cache))
    compute_metrics = ComputeMetrics(registry)
    peer_server = start_peer_server(conf, driver, compute_metrics)
    manager = ComputeManager(conf, driver, make_cache_report(conf, conductor), slots,
                             metrics=compute_metrics,
                             grants=peer_server.grants if peer_server is not None else None)
    server = rpc.get_server(transport, compute_rpcapi.TOPIC, conf.host, [manager])
    service.add_server(compute_rpcapi.TOPIC, server)
    if peer_server is not None:  # listening already: the service only stops it
        service.add_server("peer-images", _Listening(peer_server))
    reporter = make_reporter(conf, conductor, driver, peer_server)
    service.add_periodic("report", reporter.run_once, conf.report_interval)
    cache_interval = manager.image_cache_manager_interval()
    if cache_interval is not None:
        service.add_periodic("image-cache", manager.run_image_cache_manager_pass, cache_interval)
    return service


def start_peer_server(conf: cfg.ConfigOpts, driver: virt_driver.ComputeDriver,
                      compute_metrics: ComputeMetrics | None = None) -> PeerServer | None:
    """The image server that serves this host's cache to its peers (``[image_cache]
    peer_distribution``), listening; ``None`` when peer distribution is off or the driver
    keeps no image cache.

    :raises InvalidConfiguration: when it cannot listen on its address and port, or
        ``[image_cache] peer_ssl_*`` is set in part or its files cannot be loaded.
    """
    peer_tls.load(conf)  # all or none, whatever else is on: the client side uses them too
    if not conf.image_cache.peer_distribution:
        return None
    if driver.image_cache is None:
        LOG.warning("[image_cache] peer_distribution is on but virt driver %s keeps no image "
                    "cache: this host serves no peer", type(driver).__name__)
        return None
    server = PeerServer(conf, driver.image_cache, ServeGrants(), metrics=compute_metrics)
    if _is_every_address(server.address):
        raise exception.InvalidConfiguration(
            reason=f"[image_cache] peer_listen_address {server.address} is every address: "
            "peers need the one to connect to (and their requests come from it); name it")
    server.start()
    LOG.info("Serving the image cache to peers on %s", server.url)
    return server


def _is_every_address(address: str) -> bool:
    """Whether ``address`` is 0.0.0.0 or :: (a host name is not)."""
    try:
        return ipaddress.ip_address(address).is_unspecified
    except ValueError:
        return False


class _Listening:
    """A server started at build time (so that a port it cannot take fails the start-up
    with a configuration error), in the shape :class:`Service` starts and stops."""

    def __init__(self, server: PeerServer) -> None:
        self.server = server

    def start(self) -> None:
        """Already listening."""

    def stop(self) -> None:
        self.server.stop()

    def wait(self) -> None:
        """``stop`` returns once the server is closed."""


def make_reporter(
    conf: cfg.ConfigOpts, conductor: ConductorAPI, driver: virt_driver.ComputeDriver,
    peer_server: PeerServer | None = None,
) -> ServiceReporter:
    """Registration (with the driver's capabilities, the host's measured inventory and its
    operator traits: :func:`fleetcache.compute.resources.report`; its image server for peers;
    and its address, ``[DEFAULT] my_ip``) and heartbeats through the conductor, which keeps
    the host's Placement resource provider in step with them.

    Each call carries a fresh request id, so that its log lines on both sides match up.
    """

    def _context() -> RequestContext:
        return RequestContext(is_admin=True, roles=["admin"], overwrite=True)

    def register() -> None:
        capabilities: dict[str, object] = {**driver.get_capabilities(),
                                            **resources.report(conf)}
        if peer_server is not None:
            capabilities[compute_rpcapi.PEER_CAPABILITY] = compute_rpcapi.PeerEndpoint(
                url=peer_server.url, group=conf.image_cache.peer_group,
                address=peer_server.bound_address, not_cached_header=True)
        service = conductor.register_service(
            _context(), conf.host, BINARY, compute_rpcapi.TOPIC, capabilities,
            host_ip=conf.my_ip,
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


def make_cache_report(conf: cfg.ConfigOpts, conductor: ConductorAPI) -> ReportFunc:
    """The compute manager's cache reports, cast to the conductor.

    A conductor capped below the report's version (``[upgrade_levels] conductor = 1.0``) is
    logged once as a warning; no report is sent after that.
    """
    capped = False

    def report(images: list[CachedImage], usage_bytes: int) -> None:
        nonlocal capped
        if capped:
            return
        try:
            conductor.report_image_cache(get_admin_context(), conf.host, images, usage_bytes)
        except exception.RPCVersionCapped as exc:
            capped = True
            LOG.warning("Not reporting the image cache: %s", exc)

    return report


def _warn_database_settings(conf: cfg.ConfigOpts) -> None:
    location = conf.get_location("connection", "database")
    if location is not None and location.location != cfg.Locations.opt_default:
        LOG.warning("[database] connection is set in %s but a compute never uses the database; "
                    "remove it so this host holds no database credentials", location.detail)


def main(argv: Sequence[str] | None = None, conf: cfg.ConfigOpts | None = None) -> int:
    conf = common.parse_config(
        argv, BINARY, conf=conf,
        defaults={"executor_thread_pool_size": EXECUTOR_THREAD_POOL_SIZE},
        cli_opts=[CHECK_CONFIG_OPT],
    )
    if conf.check_config:
        return config_check.main_check_config(
            conf, extra=config_check.long_call_problems(conf))
    transports = rpc.Transports(conf)
    registry = CollectorRegistry()
    try:
        common.check_transports(transports, BINARY, notifications=False)  # it sends none
        service = build_service(conf, transports, registry)
        exporter = metrics.start_exporter(conf.metrics.bind_host, conf.metrics.compute_port,
                                          registry, BINARY)
    except exception.InvalidConfiguration as exc:
        common.config_error(BINARY, str(exc))
    try:
        return service.run()
    finally:
        if exporter is not None:
            exporter.stop()
        transports.cleanup()


if __name__ == "__main__":
    sys.exit(main())
