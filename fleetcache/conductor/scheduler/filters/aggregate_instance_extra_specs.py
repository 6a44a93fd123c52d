"""AggregateInstanceExtraSpecsFilter, with Nova's semantics (Nova's
``aggregate_instance_extra_specs.py``).

Each flavor extra spec that is unscoped (``ssd``) or scoped ``aggregate_instance_extra_specs:``
(``aggregate_instance_extra_specs:ssd``) must be matched, by at least one value of that key in
the host's aggregate metadata (union over aggregates, values split on commas), through Nova's
operators (:mod:`fleetcache.conductor.scheduler.filters.extra_specs_ops`). Other scopes
(``trait:``, ``resources:``, ``hw:``, ...) are skipped. A host without the key fails, so a host
in no aggregate fails any such spec; a flavor without extra specs passes everywhere.
"""

from __future__ import annotations

from fleetcache.conductor.scheduler.filters import extra_specs_ops
from fleetcache.conductor.scheduler.filters.base import BaseHostFilter
from fleetcache.conductor.scheduler.host_state import HostState
from fleetcache.conductor.scheduler.request import FilterRequest

SCOPE = "aggregate_instance_extra_specs"


class AggregateInstanceExtraSpecsFilter(BaseHostFilter):
    #: Its rule is the flavor's, which a rebuild does not change (Nova's RUN_ON_REBUILD).
    run_on_rebuild = False

    def host_fails(self, host: HostState, request: FilterRequest) -> str | None:
        for key, req in request.spec.flavor.extra_specs.items():
            scope, sep, rest = key.partition(":")
            if sep:
                if scope != SCOPE:
                    continue
                key = rest
            values = host.metadata.get(key)
            if not values:
                return f"extra spec {key} is not in the host's aggregate metadata"
            if not any(extra_specs_ops.match(value, req) for value in values):
                return f"aggregate values {', '.join(sorted(values))} of {key} do not match {req!r}"
        return None
