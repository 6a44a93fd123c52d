"""The quota driver seam: what the API asks of a quota system, and the ``noop`` driver.

A :class:`BaseQuotaDriver` answers the quota APIs (a project's limits and usage, the
defaults) and hands each ``POST /servers`` a :class:`BaseQuotaCheck`, which holds what one
request needs to ask the limits once (oslo.limit's enforcer, with the limits it read).
Callers may rely on this:

* every limit is an integer, -1 meaning unlimited;
* a check raises :class:`~fleetcache.common.exception.QuotaExceeded` (403) over a limit and
  :class:`~fleetcache.common.exception.LimitsUnavailable` (503) when the limits cannot be
  read; nothing else (a driver translates its library's errors itself).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import webob.exc

from fleetcache.api.quota import resources, usage
from fleetcache.common.db.session import Database


@dataclasses.dataclass(frozen=True)
class QuotaUsage:
    """One resource of a project: its limit (-1: none) and what the project uses."""

    limit: int
    in_use: int


class BaseQuotaCheck:
    """The quota checks of one ``POST /servers`` for one project."""

    def check_metadata_items(self, count: int) -> None:
        """:raises webob.exc.HTTPForbidden: when one server may not hold ``count`` metadata
        items (403, Nova's message).
        :raises LimitsUnavailable:"""
        limit = self.metadata_items_limit()
        if 0 <= limit < count:
            raise webob.exc.HTTPForbidden(
                explanation="Quota exceeded for metadata_items: a server holds at most "
                f"{limit} metadata items.")

    def metadata_items_limit(self) -> int:
        raise NotImplementedError

    def allowed_servers(self, amounts: Mapping[str, int], min_count: int,
                        max_count: int) -> int:
        """The most servers of ``amounts`` (:func:`.usage.per_server`), at most
        ``max_count``, that the project may add: Nova creates that many.

        :raises QuotaExceeded: when not even ``min_count`` fit.
        :raises LimitsUnavailable:
        """
        raise NotImplementedError

    def recheck_servers(self, amounts: Mapping[str, int]) -> None:
        """Check again once the servers are recorded (they count now): two requests that
        passed :meth:`allowed_servers` at once may have taken the project over together.

        :raises QuotaExceeded: when the project is over a limit now.
        :raises LimitsUnavailable:
        """
        raise NotImplementedError


class BaseQuotaDriver:
    """A quota system (``[quota] driver``): the quota APIs' answers and per-request checks."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def check(self, project_id: str | None) -> BaseQuotaCheck:
        """The checks of one request of ``project_id``."""
        raise NotImplementedError

    def project_quotas(self, project_id: str | None) -> dict[str, QuotaUsage]:
        """Every legacy name of :data:`.resources.LEGACY_NAMES` -> the project's limit and
        usage.

        :raises LimitsUnavailable:
        """
        raise NotImplementedError

    def default_quotas(self) -> dict[str, int]:
        """Every legacy name -> the limit a project without limits of its own has.

        :raises LimitsUnavailable:
        """
        raise NotImplementedError

    def legacy_usage(self, project_id: str | None) -> dict[str, int]:
        """Every legacy name -> what the project uses (0 for what fleetcache has none of)."""
        used = usage.project_usage(self.db, project_id)
        return {name: used.get(unified, 0) for unified, name in resources.COUNTED.items()}


class NoopQuotaCheck(BaseQuotaCheck):
    """No limit but the metadata cap."""

    def metadata_items_limit(self) -> int:
        return resources.DEFAULT_METADATA_ITEMS

    def allowed_servers(self, amounts: Mapping[str, int], min_count: int,
                        max_count: int) -> int:
        return max_count

    def recheck_servers(self, amounts: Mapping[str, int]) -> None:
        return None


class NoopQuotaDriver(BaseQuotaDriver):
    """``[quota] driver = noop``: everything unlimited (-1), as Nova's ``NoopQuotaDriver``,
    except the metadata cap; the usage is counted all the same."""

    def check(self, project_id: str | None) -> BaseQuotaCheck:
        return NoopQuotaCheck()

    def default_quotas(self) -> dict[str, int]:
        return {name: (resources.DEFAULT_METADATA_ITEMS if name == "metadata_items" else -1)
                for name in resources.LEGACY_NAMES}

    def project_quotas(self, project_id: str | None) -> dict[str, QuotaUsage]:
        used = self.legacy_usage(project_id)
        return {name: QuotaUsage(limit, used.get(name, 0))
                for name, limit in self.default_quotas().items()}
