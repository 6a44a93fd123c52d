"""``[quota] driver = unified_limits``: Keystone's unified limits, enforced with oslo.limit
(Nova's ``nova/limit/placement.py`` and ``nova/limit/local.py``).

The limits are Keystone's registered limits of the compute service (every project's
default) and its project limits (one project's override), found through ``[oslo_limit]``
(:mod:`.limit_conf`); the usage is fleetcache's own count (:mod:`.usage`). As in Nova, each
request builds its own ``oslo_limit.limit.Enforcer``, which reads the limits it needs from
Keystone once, so that a limit changed in Keystone applies to the next request.

oslo.limit's rules hold: a resource without a registered limit has a limit of 0, and -1 is
unlimited; ``server_metadata_items`` (and Nova's other per-request limits) use the registered
limit only, as Nova's ``enforce_api_limit`` does.

Keystone and oslo.limit errors become :class:`~fleetcache.common.exception.LimitsUnavailable`
(503) here, in one place.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Collection, Iterator, Mapping, Sequence

from keystoneauth1 import exceptions as ksa_exceptions
from openstack import exceptions as sdk_exceptions
from oslo_limit import exception as limit_exceptions
from oslo_limit import limit

from fleetcache.api.quota import resources, usage
from fleetcache.api.quota.base import BaseQuotaCheck, BaseQuotaDriver, QuotaUsage
from fleetcache.common import exception
from fleetcache.common.db.session import Database

LOG = logging.getLogger(__name__)

#: What talking to Keystone through oslo.limit raises: no session (bad ``[oslo_limit]``
#: credentials, Keystone down at the first request), an HTTP or connection error.
KEYSTONE_ERRORS: tuple[type[Exception], ...] = (
    limit_exceptions.SessionInitError, ksa_exceptions.ClientException,
    sdk_exceptions.SDKException)
#: What building an enforcer raises besides: oslo.limit's ``ValueError`` when
#: ``[oslo_limit]`` names no service, region or endpoint Keystone has (or several), and a
#: ``KeyError`` when Keystone's ``/limits/model`` answer has no model.
SETUP_ERRORS: tuple[type[Exception], ...] = (*KEYSTONE_ERRORS, ValueError, KeyError)


@contextlib.contextmanager
def _keystone_errors(errors: tuple[type[Exception], ...] = KEYSTONE_ERRORS) -> Iterator[None]:
    try:
        yield
    except errors as exc:
        LOG.error("Reading the limits from Keystone failed: %s: %s", type(exc).__name__, exc)
        raise exception.LimitsUnavailable(
            reason=f"{type(exc).__name__}: {exc} (check [oslo_limit] and Keystone)") from exc


class UnifiedLimitsCheck(BaseQuotaCheck):
    """The checks of one request: one enforcer (built on first use), its limits read once."""

    def __init__(self, db: Database, project_id: str | None) -> None:
        self.db = db
        self.project_id = project_id
        self._enforcer: limit.Enforcer | None = None

    def _usage(self, project_id: str | None, names: Collection[str]) -> dict[str, int]:
        """oslo.limit's usage callback: the project's count of each of ``names``; 0 for the
        limits of one request (their deltas are the request's own numbers)."""
        used = usage.project_usage(self.db, project_id) if any(
            name not in resources.REGISTERED_ONLY for name in names) else {}
        return {name: used.get(name, 0) for name in names}

    @property
    def enforcer(self) -> limit.Enforcer:
        """:raises LimitsUnavailable:"""
        if self._enforcer is None:
            with _keystone_errors(SETUP_ERRORS):
                self._enforcer = limit.Enforcer(self._usage)
        return self._enforcer

    def enforce(self, project_id: str | None, deltas: dict[str, int]) -> None:
        """:raises ProjectOverLimit: (oslo.limit's) :raises LimitsUnavailable:"""
        enforcer = self.enforcer
        with _keystone_errors():
            enforcer.enforce(project_id, deltas)

    def metadata_items_limit(self) -> int:
        enforcer = self.enforcer
        with _keystone_errors():
            ((_, value),) = enforcer.get_registered_limits([resources.SERVER_METADATA_ITEMS])
        return int(value)

    def allowed_servers(self, amounts: Mapping[str, int], min_count: int,
                        max_count: int) -> int:
        try:
            self.enforce(self.project_id, usage.deltas(amounts, max_count))
            return max_count
        except limit_exceptions.ProjectOverLimit as exc:
            over = exc.over_limit_info_list
        count = fitting_count(over, amounts, max_count)
        if count >= min_count:
            try:
                self.enforce(self.project_id, usage.deltas(amounts, count))
                return count
            except limit_exceptions.ProjectOverLimit as exc:  # a limit changed meanwhile
                over = exc.over_limit_info_list
        raise exceeded(over, amounts, min_count)

    def recheck_servers(self, amounts: Mapping[str, int]) -> None:
        try:
            self.enforce(self.project_id, usage.deltas(amounts, 0))
        except limit_exceptions.ProjectOverLimit as exc:
            raise exceeded(exc.over_limit_info_list, amounts, 0) from exc


def _per_server(name: str, amounts: Mapping[str, int]) -> int:
    return 1 if name == resources.SERVERS else amounts.get(name, 0)


def fitting_count(over: Sequence[limit_exceptions.OverLimitInfo],
                  amounts: Mapping[str, int], max_count: int) -> int:
    """How many servers of ``amounts`` fit under every limit of ``over`` (each exceeded by
    ``max_count`` of them; the limits not listed held ``max_count``, so hold fewer too).
    Nova tries ``max_count - 1``, then one less, down to ``min_count``; this asks once."""
    count = max_count
    for info in over:
        per = _per_server(info.resource_name, amounts)
        if per > 0:
            count = min(count, max(info.limit - info.current_usage, 0) // per)
    return count


def exceeded(over: Sequence[limit_exceptions.OverLimitInfo], amounts: Mapping[str, int],
             count: int) -> exception.QuotaExceeded:
    """Nova's ``TooManyInstances`` for ``count`` servers of ``amounts``: the limits of
    ``over`` they still exceed, by their legacy names (``instances``, ``cores``, ``ram``)."""
    rows = [(info, _per_server(info.resource_name, amounts) * count) for info in over]
    still = [(info, asked) for info, asked in rows if info.current_usage + asked > info.limit]
    rows = still or rows

    def joined(values: list[object]) -> str:
        return ", ".join(str(v) for v in values)

    return exception.QuotaExceeded(
        overs=joined([resources.legacy_name(info.resource_name) for info, _ in rows]),
        req=joined([asked for _, asked in rows]),
        used=joined([info.current_usage for info, _ in rows]),
        allowed=joined([info.limit for info, _ in rows]))


class UnifiedLimitsDriver(BaseQuotaDriver):
    """Limits from Keystone through oslo.limit, usage from fleetcache's database."""

    def check(self, project_id: str | None) -> BaseQuotaCheck:
        return UnifiedLimitsCheck(self.db, project_id)

    def _limits(self, project_id: str | None, registered: bool) -> dict[str, int]:
        """Legacy name -> limit: the project's limits of the counted resources (its own, or
        the registered ones; ``registered``: the registered ones), and the registered limits
        of the per-request ones; -1 for nova-network's."""
        enforcer = UnifiedLimitsCheck(self.db, project_id).enforcer
        with _keystone_errors():
            if registered:
                counted = enforcer.get_registered_limits(list(resources.COUNTED))
            else:
                counted = enforcer.get_project_limits(project_id, list(resources.COUNTED))
            local = enforcer.get_registered_limits(list(resources.REGISTERED_ONLY))
        found = {resources.legacy_name(name): int(value) for name, value in [*counted, *local]}
        return {name: found.get(name, -1) for name in resources.LEGACY_NAMES}

    def default_quotas(self) -> dict[str, int]:
        return self._limits(None, registered=True)

    def project_quotas(self, project_id: str | None) -> dict[str, QuotaUsage]:
        limits = self._limits(project_id, registered=False)
        used = self.legacy_usage(project_id)
        return {name: QuotaUsage(value, used.get(name, 0)) for name, value in limits.items()}
