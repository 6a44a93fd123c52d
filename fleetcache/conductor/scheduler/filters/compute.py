"""ComputeFilter: only hosts whose compute service is up and enabled (Nova's), up as
``fleetcache.common.servicegroup`` judges it from the last heartbeat."""

from __future__ import annotations

from oslo_config import cfg

from fleetcache.common.servicegroup import service_is_up
from fleetcache.conductor.scheduler.filters.base import BaseHostFilter
from fleetcache.conductor.scheduler.host_state import HostState
from fleetcache.conductor.scheduler.request import FilterRequest


class ComputeFilter(BaseHostFilter):
    #: A disabled host keeps its instances, and a rebuild makes none: Nova's errata to
    #: OSSA-2017-005 stopped rebuilds on disabled hosts failing (ComputeFilter.RUN_ON_REBUILD).
    #: A down host fails the rebuild at its RPC call instead, with the timeout's message.
    run_on_rebuild = False

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        super().__init__(conf)
        self.service_down_time = conf.service_down_time

    def host_fails(self, host: HostState, request: FilterRequest) -> str | None:
        service = host.service
        if service is None:
            return "no compute service"
        if service["disabled"]:
            return f"compute service disabled ({service['disabled_reason'] or 'no reason'})"
        if not service_is_up(service, self.service_down_time, now=request.now):
            return "compute service is down"
        return None
