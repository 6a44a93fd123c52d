"""The fan-out baseline: a bare oslo.messaging client calling every fake compute once.

No fleetcache code on the client side: one ``get_rpc_transport`` per cell, one RPC client per
transport, and one no-op ``cache_images(image_ids=[])`` call per host through a
``futurist.ThreadPoolExecutor`` of ``concurrency`` workers. That is the transport's limit on
this machine (client, broker and servers share its CPUs), against which the real job is
compared.

Two pieces of fleetcache do run here, the two kombu patches every fleetcache service applies
at start-up: :mod:`fleetcache.common.kombu_locks` (kombu's class-wide lock on every
cached-property read made the client and the computes fall into a lock convoy) and
:mod:`fleetcache.common.kombu_revival` (no class created per ``autoretry`` call). Applied on
both sides, the baseline stays the stronger transport, not a handicapped one.
"""

from __future__ import annotations

import logging
import resource
import time

import futurist
import oslo_messaging
from _fleet import Cell
from oslo_config import cfg


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# "Number of call queues is 11, greater than warning threshold" is expected at this parallelism.
logging.getLogger("oslo_messaging._drivers.amqpdriver").setLevel(logging.ERROR)


class Baseline:
    """Bare RPC clients for ``cells``, reused across rounds (connections stay warm)."""

    def __init__(self, cells: list[Cell], concurrency: int, timeout: int = 120,
                 call_monitor_timeout: int | None = None) -> None:
        from fleetcache.common import kombu_locks, kombu_revival

        kombu_locks.read_cached_properties_without_lock()
        kombu_revival.autoretry_without_class_per_call()
        self.conf = cfg.ConfigOpts()
        self.conf([], project="fcbench-baseline", default_config_files=[])
        # NOTE: oslo.messaging 18.3 registers these groups only on the global cfg.CONF; on a
        # private ConfigOpts every call() and cast() raises NoSuchOptError for them.
        from oslo_messaging._metrics import client as metrics_client
        from oslo_messaging._tracing import client as tracing_client

        self.conf.register_opts(tracing_client.oslo_messaging_tracing,
                                group="oslo_messaging_tracing")
        self.conf.register_opts(metrics_client.oslo_messaging_metrics,
                                group="oslo_messaging_metrics")
        from oslo_messaging._drivers import amqp, impl_rabbit

        self.conf.register_opts(impl_rabbit.rabbit_opts, group="oslo_messaging_rabbit")
        self.conf.register_opts(amqp.amqp_opts, group="oslo_messaging_rabbit")
        # As many pooled send connections as callers, as the conductor is configured.
        self.conf.set_override("rpc_conn_pool_size", max(30, concurrency),
                               group="oslo_messaging_rabbit")
        self.concurrency = concurrency
        self.timeout = timeout
        self.call_monitor_timeout = call_monitor_timeout
        self.transports = []
        self.calls: list[tuple[oslo_messaging.RPCClient, str]] = []
        for cell in cells:
            transport = oslo_messaging.get_rpc_transport(self.conf, url=cell.transport_url)
            self.transports.append(transport)
            client = oslo_messaging.get_rpc_client(
                transport, oslo_messaging.Target(topic="compute"), timeout=timeout
            )
            self.calls.extend((client, host) for host in cell.hosts)
        # Interleave the cells as the conductor's host order does (sorted names alternate).
        self.calls.sort(key=lambda call: call[1])

    def _call(self, client: oslo_messaging.RPCClient, host: str) -> None:
        cctxt = client.prepare(server=host, call_monitor_timeout=self.call_monitor_timeout)
        cctxt.call({}, "cache_images", image_ids=[])

    def run(self) -> tuple[float, float]:
        """Call every host once. Raises on any failure.

        :returns: the wall time and this process's CPU time, in seconds (nothing else runs
            in this process meanwhile).
        """
        with futurist.ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            cpu = _cpu()
            started = time.monotonic()
            futures = [pool.submit(self._call, client, host) for client, host in self.calls]
            for future in futures:
                future.result()
            return time.monotonic() - started, _cpu() - cpu

    def cleanup(self) -> None:
        for transport in self.transports:
            transport.cleanup()
