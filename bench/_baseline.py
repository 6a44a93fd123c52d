"""The fan-out baseline: a bare oslo.messaging client calling every fake compute once.

No fleetcache code on the client side: one ``get_rpc_transport`` per cell, one RPC client per
transport, and one ``cache_images(image_ids=...)`` call per host, with the same image ids as
the job's, through a ``futurist.ThreadPoolExecutor`` of ``concurrency`` workers. The fake
computes answer it exactly as they answer the job (at once, or after a simulated download:
``bench/fanout.py --image-mib``), so the comparison holds the computes' work equal. That is
the transport's limit on this machine (client, broker and servers share its CPUs), against
which the real job is compared.

oslo.messaging's public API only: its options live on the global ``cfg.CONF``, where the
library itself registers the tracing and metrics groups every ``call`` reads (a private
``ConfigOpts`` would need them registered from its private modules); the rabbit driver's
options come from ``oslo_messaging.opts.list_opts()``, so that the send pool can be sized
before the transport is built.
"""

from __future__ import annotations

import logging
import resource
import time

import futurist
import oslo_messaging
from _fleet import Cell
from oslo_config import cfg
from oslo_messaging import opts as messaging_opts

RABBIT_GROUP = "oslo_messaging_rabbit"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# "Number of call queues is 11, greater than warning threshold" is expected at this parallelism.
logging.getLogger("oslo_messaging._drivers.amqpdriver").setLevel(logging.ERROR)


def _conf(concurrency: int) -> cfg.ConfigOpts:
    """The global ``cfg.CONF``, parsed once with no file, as many pooled send connections as
    callers (as the conductor is configured: ``bench/_services.py``)."""
    conf = cfg.CONF
    for group, opts in messaging_opts.list_opts():
        if group == RABBIT_GROUP:
            try:
                conf.register_opts(opts, group=group)
            except cfg.DuplicateOptError:
                pass
    conf([], project="fcbench-baseline", default_config_files=[])
    conf.set_override("rpc_conn_pool_size", max(30, concurrency), group=RABBIT_GROUP)
    return conf


class Baseline:
    """Bare RPC clients for ``cells``, reused across rounds (connections stay warm)."""

    def __init__(self, cells: list[Cell], concurrency: int, image_ids: list[str],
                 timeout: int = 120, call_monitor_timeout: int | None = None) -> None:
        self.conf = _conf(concurrency)
        self.concurrency = concurrency
        self.image_ids = image_ids
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
        results = cctxt.call({}, "cache_images", image_ids=self.image_ids)
        bad = {i: r for i, r in results.items() if r.get("state") not in ("cached", "existing")}
        if bad:
            raise RuntimeError(f"{host} answered {bad}")

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
