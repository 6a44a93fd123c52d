"""Options of the ``[quota]`` group: how the API enforces projects' quotas.

The limits themselves live in Keystone (unified limits); the API reads them with oslo.limit,
whose own options are in ``[oslo_limit]`` (the service user, and which endpoint's limits
apply): :mod:`fleetcache.api.quota.limit_conf` registers those.
"""

from __future__ import annotations

from oslo_config import cfg

UNIFIED_LIMITS = "unified_limits"
NOOP = "noop"

quota_group = cfg.OptGroup("quota", title="Quota options")

quota_opts: list[cfg.Opt] = [
    cfg.StrOpt(
        "driver",
        default=UNIFIED_LIMITS,
        choices=[
            (UNIFIED_LIMITS, "Keystone unified limits, enforced with oslo.limit (Nova's "
             "nova.quota.UnifiedLimitsDriver): registered limits are every project's "
             "defaults, a project limit overrides one for its project; usage is counted from "
             "fleetcache's own database."),
            (NOOP, "No quota: every limit is unlimited (-1), except the 128 metadata items a "
             "server may have (Nova's nova.quota.NoopQuotaDriver). For labs without Keystone "
             "(``fleetcache demo``, ``[api] auth_strategy = noauth``)."),
        ],
        help="""
How ``POST /servers``, ``GET /limits`` and ``/os-quota-sets`` learn projects' limits.

With ``unified_limits`` every resource a server takes (``servers``, ``class:VCPU``,
``class:MEMORY_MB``, ``class:DISK_GB``, and ``server_metadata_items`` per server) needs a
registered limit of the compute service in Keystone: oslo.limit counts a resource without
one as a limit of 0 (-1 means unlimited). ``fleetcache-api`` refuses to start when
``[oslo_limit]`` names no service user or no endpoint.

Related options:
* ``[oslo_limit]``: ``auth_type`` and the service user's credentials, and
  ``endpoint_id`` or ``endpoint_service_type`` (with ``endpoint_region_name``).
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(quota_group)
    conf.register_opts(quota_opts, group=quota_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(quota_group, quota_opts)]
