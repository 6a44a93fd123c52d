"""Options of the ``[DEFAULT]`` group shared by every daemon."""

from __future__ import annotations

import socket

from oslo_config import cfg
from oslo_utils import netutils

default_opts: list[cfg.Opt] = [
    cfg.HostDomainOpt(
        "host",
        default=socket.gethostname(),
        sample_default="<current_hostname>",
        help="""
Name of this node, as the other services know it.

A compute agent listens for RPC on topic ``compute`` with this value as its server name, and
aggregates name hosts by it. It must be unique in the deployment.
""",
    ),
    cfg.IPOpt(
        "my_ip",
        # Nova's default (nova/conf/netconf.py): the address of the interface that routes
        # to the outside, found without sending a packet; 127.0.0.1 on a host with no route.
        default=netutils.get_my_ipv4(),
        sample_default="<host_ipv4>",
        help="""
The IP address this host uses on the management network (Nova's option and default).

A compute reports it when it registers; the API shows it as the hypervisor's ``host_ip``
(``GET /os-hypervisors/detail``, ``openstack hypervisor show``).

Possible values:

* An IPv4 or IPv6 address. Default: the IPv4 address of this host's default route.
""",
    ),
    cfg.StrOpt(
        "state_path",
        default="/var/lib/fleetcache",
        help="Top-level directory for fleetcache's state (SQLite database, locks).",
    ),
    cfg.StrOpt(
        "instances_path",
        default="$state_path/instances",
        help="""
Where a compute keeps instance disks and its image cache.

The image cache lives in ``<instances_path>/<[image_cache] subdirectory_name>``.
""",
    ),
    cfg.IntOpt(
        "long_rpc_timeout",
        default=1800,
        min=1,
        help="""
Hard upper bound, in seconds, for RPC calls that may run long (image pre-caching).

A live remote end is never cut before this; a dead one is noticed sooner through
``rpc_response_timeout``, which such calls use as their ``call_monitor_timeout``.

Related options:
* rpc_response_timeout
""",
    ),
    cfg.IntOpt(
        "report_interval",
        default=10,
        min=1,
        help="Seconds between two heartbeats a service sends to the conductor.",
    ),
    cfg.IntOpt(
        "service_down_time",
        default=60,
        min=1,
        help="""
Maximum age, in seconds, of a service's last heartbeat for it to count as up.

Must be larger than ``report_interval``.

Related options:
* report_interval
""",
    ),
    cfg.IntOpt(
        "rpc_send_retries",
        default=3,
        min=-1,
        help="""
How often an RPC client retries sending a request while the broker is unreachable.

oslo.messaging's own default retries forever, which makes a ``call`` block past its timeout
during a broker outage. -1 means retry forever.
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(default_opts)


def list_opts() -> list[tuple[str | None, list[cfg.Opt]]]:
    return [(None, default_opts)]
