"""Projects' quotas, as Nova enforces them with Keystone's unified limits.

``[quota] driver`` picks the driver (:func:`get_driver`): ``unified_limits`` (limits in
Keystone, read with oslo.limit: :mod:`.unified`) or ``noop`` (:mod:`.base`). The API builds
it once (``ApiState.quota``); ``POST /servers`` asks one check per request, ``GET /limits``
and ``/os-quota-sets`` the project's limits and usage::

    check = state.quota.check(project_id)
    check.check_metadata_items(len(metadata))
    count = check.allowed_servers(usage.per_server(flavor), min_count, max_count)
    ...  # record ``count`` servers
    check.recheck_servers(usage.per_server(flavor))

Modules: :mod:`.resources` (the limits' names), :mod:`.usage` (what a project uses, what a
request adds), :mod:`.base` (the seam and the ``noop`` driver), :mod:`.unified`,
:mod:`.limit_conf` (the ``[oslo_limit]`` options).
"""

from __future__ import annotations

from oslo_config import cfg

from fleetcache.api.quota import limit_conf
from fleetcache.api.quota.base import BaseQuotaCheck, BaseQuotaDriver, NoopQuotaDriver, QuotaUsage
from fleetcache.api.quota.unified import UnifiedLimitsDriver
from fleetcache.common.config import quota as quota_config
from fleetcache.common.db.session import Database

__all__ = ["BaseQuotaCheck", "BaseQuotaDriver", "QuotaUsage", "get_driver", "register_opts"]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register ``[oslo_limit]`` on the API's ``conf`` (``[quota]`` is fleetcache's own)."""
    limit_conf.register_opts(conf)


def get_driver(conf: cfg.ConfigOpts, db: Database) -> BaseQuotaDriver:
    """The driver ``[quota] driver`` names; ``unified_limits`` hands ``[oslo_limit]`` to
    oslo.limit first."""
    if conf.quota.driver == quota_config.NOOP:
        return NoopQuotaDriver(db)
    limit_conf.apply(conf)
    return UnifiedLimitsDriver(db)
