"""One process hosting many fake compute agents (a shard of bench/fanout.py's fleet).

Each agent is what ``fleetcache-compute`` serves on its host: a
:class:`~fleetcache.compute.manager.ComputeManager` over the fake virt driver, listening on
topic ``compute`` with the host name as its server, on its cell's transport. All agents of a
shard are in one cell (one transport, shared by their RPC servers).

NOTE: at most ~100 threaded RPC servers per process with a small executor pool: every server
keeps up to ``executor_thread_pool_size`` worker threads (futurist starts one per submit and
never retires them), and 1,000 servers in one CPython process reached a GIL/futex convoy in
which poll threads missed AMQP heartbeats and the broker dropped connections; 10 processes of
100 servers each held. The shard never stops its servers gracefully (``stop()``/``wait()``
costs about a second per server): the broker drops their connections when the process exits,
and their non-durable queues die with the bench broker. Figures: docs/performance.md, "What
oslo.messaging's threading RPC server costs".

With ``--download-seconds S`` every image is missing on every call and takes ``S`` seconds to
"download" (bench/fanout.py's realistic mode, ``--image-mib``): each round finds the fleet
without the image, as the pre-cache of a new image does, and the job's calls and the bare
baseline's are answered alike.

Protocol with the parent: prints ``READY <n>`` once every server listens, then exits when its
stdin closes or on SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time

from oslo_config import cfg
from oslo_messaging.rpc import server as rpc_server

from fleetcache.common import config, rpc
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import CacheOutcome
from fleetcache.compute.manager import ComputeManager
from fleetcache.compute.virt import driver as virt_driver
from fleetcache.compute.virt.fake import FakeDriver


def _conf(args: argparse.Namespace) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    rpc.register_opts(conf)  # executor_thread_pool_size, as fleetcache-compute does
    conf([], project="fleetcache", default_config_files=[])
    conf.set_override("compute_driver", "fake")
    conf.set_override("executor_thread_pool_size", args.executor_pool)
    # NOTE: [compute] max_concurrent_long_calls keeps its default (24, above this pool): each
    # fake compute gets one call at a time here, and with the limit set to pool - 1 the bare
    # RPC baseline ran several times slower at 1,000 hosts for a cause not found yet
    # (docs/performance.md, "Fan-out").
    rpc.init(conf)
    return conf


class _DownloadingDriver(FakeDriver):
    """The fake driver with nothing ever cached: each image takes ``seconds`` to "download" on
    every call (the realistic mode; ``[fake_driver] cache_delay`` would sleep once per image,
    then answer ``existing`` from the second round on)."""

    def __init__(self, conf: cfg.ConfigOpts, seconds: float) -> None:
        super().__init__(conf)
        self.seconds = seconds

    def cache_image(self, ctxt: RequestContext, image_id: str) -> CacheOutcome:
        time.sleep(self.seconds)
        return CacheOutcome(downloaded=True)


def _driver(conf: cfg.ConfigOpts, host: str, image_ids: list[str],
            download_seconds: float | None) -> virt_driver.ComputeDriver:
    """The fake driver of ``host``: with ``image_ids`` already in its cache, or, with
    ``download_seconds``, one that downloads every image on every call."""
    driver = (FakeDriver(conf) if download_seconds is None
              else _DownloadingDriver(conf, download_seconds))
    driver.init_host(host)
    if download_seconds is None:
        driver.cached_images.update(image_ids)
    return driver


class _MultiHostServer(rpc_server.RPCServer):
    """One oslo.messaging RPC server that also consumes the ``compute.<host>`` queues of
    ``extra_hosts``, on its own connection (the scale mode, ``--hosts-per-server``).

    NOTE: oslo.messaging has no public way to serve several servers' queues from one listener;
    this adds the same topic consumers its rabbit driver declares for a server
    (``RabbitDriver.listen``) to the listener's connection before it polls. The queues, their
    bindings and the messages are the real ones: the conductor still sends each host's call to
    that host's queue, and the reply goes back to its caller as usual.
    """

    def __init__(self, base: rpc_server.RPCServer, extra_hosts: list[str]) -> None:
        super().__init__(base.transport, base._target, base.dispatcher)
        self.extra_hosts = extra_hosts

    def _create_listener(self):  # type: ignore[no-untyped-def]
        adapter = super()._create_listener()
        listener = adapter._poll_style_listener
        exchange = self.transport._driver._get_exchange(self._target)
        for host in self.extra_hosts:
            listener.conn.declare_topic_consumer(
                exchange_name=exchange, topic=f"{self._target.topic}.{host}", callback=listener)
        return adapter


def main() -> None:
    # 100 agents share one reply-connection pool: "Connection pool limit exceeded" is expected.
    logging.getLogger("oslo_messaging._drivers.pool").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transport-url", required=True)
    parser.add_argument("--hosts", required=True, help="comma-separated host names")
    parser.add_argument("--executor-pool", type=int, default=2)
    parser.add_argument("--hosts-per-server", type=int, default=1,
                        help="hosts whose queues one RPC server (one agent) consumes")
    parser.add_argument("--cached-image", action="append", default=[])
    parser.add_argument("--download-seconds", type=float, default=None,
                        help="every image is missing and takes this long to download")
    args = parser.parse_args()

    conf = _conf(args)
    transport = rpc.Transports(conf).get(args.transport_url)  # closed by os._exit below
    started = time.monotonic()
    servers = []
    hosts = args.hosts.split(",")
    for i in range(0, len(hosts), args.hosts_per_server):
        group = hosts[i:i + args.hosts_per_server]
        driver = _driver(conf, group[0], args.cached_image, args.download_seconds)
        manager = ComputeManager(conf, driver)
        server = rpc.get_server(transport, "compute", group[0], [manager])
        if len(group) > 1:
            server = _MultiHostServer(server, group[1:])
        server.start()
        servers.append(server)
    print(f"READY {len(hosts)} {time.monotonic() - started:.2f}", flush=True)

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    sys.stdin.read()  # the parent closes our stdin (or dies) to stop us
    os._exit(0)


if __name__ == "__main__":
    main()
