"""Options of the ``[placement]`` group: how the conductor reaches OpenStack Placement.

The group is Nova's: keystoneauth session, auth and adapter options (``service_type``
``placement``, ``endpoint_override``, ``valid_interfaces``, ...). Only the conductor and
``fleetcache-manage`` use it; computes hold no Placement credentials.

A lab without Keystone uses the ``admin_token`` auth plugin against a Placement in
``[api] auth_strategy = noauth2``: ``auth_type = admin_token``, ``endpoint = <url>``,
``token = admin`` (noauth2 reads the token as ``<user>[:<project>]`` and gives the user
``admin`` the admin role). Without ``auth_type`` Placement is not configured: the conductor
keeps no resource providers and no compute is schedulable.
"""

from __future__ import annotations

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from fleetcache.common import service_auth

placement_group = cfg.OptGroup(
    "placement",
    title="Placement service options",
    help="How the conductor reaches OpenStack Placement (keystoneauth options, as Nova's).",
)

placement_opts: list[cfg.Opt] = [
    cfg.IntOpt(
        "generation_conflict_retries",
        default=5,
        min=0,
        help="""
Times the conductor re-reads a resource provider and writes again when Placement answers a
write with a generation conflict (409 ``placement.concurrent_update``: another writer changed
the provider in between). Not Nova's. After the last one the compute stays unreported (not
schedulable) and the next heartbeat tries again.
""",
    ),
]

DEFAULT_SERVICE_TYPE = "placement"
#: Seconds one attempt of a Placement request may take (keystoneauth's ``timeout``, unset = no
#: limit): the conductor writes providers from its RPC workers, which a hung Placement must not
#: hold. keystoneauth sends a timed-out request again like a reset one (``connect_retries``:
#: its session maps requests' ``Timeout`` to ``ConnectTimeout``, a retriable failure),
#: so a hung Placement holds a worker 3 x 10 + 0.5 + 1 = 31.5 s a request, inside the 60 s
#: ``rpc_response_timeout`` of a compute's ``register_service`` call. The slowest request,
#: ``GET /allocation_candidates`` of 10,000 providers, took 1.02 s p50 on two cores
#: (docs/performance.md, "Scheduling at 10,000 hosts"). ``timeout`` bounds each wait for the
#: next bytes, not an answer's whole transfer.
DEFAULT_TIMEOUT = 10


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(placement_group)
    conf.register_opts(placement_opts, group=placement_group)
    ks_loading.register_session_conf_options(conf, placement_group.name)
    ks_loading.register_auth_conf_options(conf, placement_group.name)
    ks_loading.register_adapter_conf_options(
        conf, placement_group.name, include_deprecated=False)
    conf.set_default("service_type", DEFAULT_SERVICE_TYPE, group=placement_group.name)
    conf.set_default("timeout", DEFAULT_TIMEOUT, group=placement_group.name)
    conf.set_default("connect_retries", service_auth.CONNECT_RETRIES,
                     group=placement_group.name)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    auth = ks_loading.get_auth_common_conf_options()
    session = ks_loading.get_session_conf_options()
    adapter = ks_loading.get_adapter_conf_options(include_deprecated=False)
    for opt in adapter:
        if opt.dest == "service_type":
            opt.default = DEFAULT_SERVICE_TYPE
        elif opt.dest == "connect_retries":
            opt.default = service_auth.CONNECT_RETRIES
    for opt in session:
        if opt.dest == "timeout":
            opt.default = DEFAULT_TIMEOUT
    return [(placement_group, placement_opts + session + auth + adapter)]
