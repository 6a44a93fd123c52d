"""The Prometheus exporter a daemon serves its metrics from (``prometheus-client``).

Each daemon builds its own :class:`~prometheus_client.CollectorRegistry` at start-up, hands it
to the parts that record metrics (:mod:`fleetcache.conductor.metrics`,
:mod:`fleetcache.compute.metrics`) and serves it with :func:`start_exporter` when its
``[metrics]`` port is set. Nothing registers in prometheus-client's process-wide default
registry, so two services in one process (the demo, the tests) never share a metric.

Use::

    registry = CollectorRegistry()
    metrics = ComputeMetrics(registry)
    exporter = start_exporter(conf.metrics.bind_host, conf.metrics.compute_port, registry)
    ...
    exporter.stop()
"""

from __future__ import annotations

import logging
import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import start_wsgi_server

from fleetcache.common import exception

LOG = logging.getLogger(__name__)


class Exporter:
    """One running exporter: ``GET /metrics`` (any path, as prometheus-client serves it)."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self.server = server
        self.thread = thread

    @property
    def port(self) -> int:
        port: int = self.server.server_address[1]
        return port

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def start_exporter(host: str, port: int | None, registry: CollectorRegistry,
                   service: str = "") -> Exporter | None:
    """Serve ``registry`` on ``host:port`` from a daemon thread; ``None`` when ``port`` is
    unset (the exporter is off).

    :raises InvalidConfiguration: when the port cannot be bound (in use, not allowed).
    """
    if port is None:
        return None
    try:
        server, thread = start_wsgi_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise exception.InvalidConfiguration(
            reason=f"cannot serve {service} metrics on {host}:{port}: {exc}") from exc
    LOG.info("Serving %s metrics on http://%s:%d/metrics", service or "the", host,
             server.server_address[1])
    return Exporter(server, thread)
