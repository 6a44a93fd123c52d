"""Options of the ``[metrics]`` group: the Prometheus exporters of the conductor and computes."""

from __future__ import annotations

from oslo_config import cfg

metrics_group = cfg.OptGroup("metrics", title="Prometheus metrics exporters")

metrics_opts: list[cfg.Opt] = [
    cfg.HostAddressOpt(
        "bind_host",
        default="127.0.0.1",
        help="""
Address the metrics exporters listen on.

The exporter has no authentication: the metrics name images and hosts, so it listens on the
loopback address unless told otherwise (a Prometheus on another host needs ``0.0.0.0`` or the
host's address, and a firewall).

Related options:
* conductor_port, compute_port
""",
    ),
    cfg.PortOpt(
        "conductor_port",
        default=None,
        help="""
TCP port of ``fleetcache-conductor``'s Prometheus exporter (``GET /metrics``).

Possible values:
* unset (the default): no exporter;
* a port: the conductor serves its metrics there (host calls in flight, per-host results,
  jobs by state).

Related options:
* compute_port: a different port, so that a conductor and a compute can share one
  configuration file on one host.
""",
    ),
    cfg.PortOpt(
        "compute_port",
        default=None,
        help="""
TCP port of ``fleetcache-compute``'s Prometheus exporter (``GET /metrics``).

Possible values:
* unset (the default): no exporter;
* a port: the compute serves its metrics there (downloads, bytes and durations by source,
  verification failures, fallbacks from Ceph to HTTP, the image cache's size and entries).

Related options:
* conductor_port
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(metrics_group)
    conf.register_opts(metrics_opts, group=metrics_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(metrics_group, metrics_opts)]
