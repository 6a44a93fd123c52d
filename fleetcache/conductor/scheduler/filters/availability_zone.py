"""AvailabilityZoneFilter: a request for a zone goes only to hosts of that zone (Nova's): a
host's zones are the ``availability_zone`` metadata of its aggregates, or ``[DEFAULT]
default_availability_zone`` when none sets one. Usually the request filter has already asked
Placement for the zone's aggregates; this filter holds when it could not."""

from __future__ import annotations

from fleetcache.common.db.aggregates import AZ_KEY
from fleetcache.conductor.scheduler.filters.base import BaseHostFilter
from fleetcache.conductor.scheduler.host_state import HostState
from fleetcache.conductor.scheduler.request import FilterRequest


class AvailabilityZoneFilter(BaseHostFilter):
    #: A rebuild stays on its host, whatever zone the host is in now (Nova's RUN_ON_REBUILD).
    run_on_rebuild = False

    def host_fails(self, host: HostState, request: FilterRequest) -> str | None:
        wanted = request.spec.availability_zone
        if not wanted:
            return None
        zones = host.metadata.get(AZ_KEY) or {self.conf.default_availability_zone}
        if wanted in zones:
            return None
        return f"in zone(s) {', '.join(sorted(zones))}, not {wanted}"
