"""Small builders for the scheduler unit tests: hosts, requests and aggregate catalogs
without a database or Placement."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from fleetcache.common.db.models import utcnow
from fleetcache.common.db.scheduling import ComputeStatus
from fleetcache.conductor.placement.provider import provider_uuid
from fleetcache.conductor.scheduler import FlavorSpec, RequestSpec
from fleetcache.conductor.scheduler.aggregates import AggregateCatalog
from fleetcache.conductor.scheduler.host_state import HostState
from fleetcache.conductor.scheduler.request import FilterRequest


def flavor(extra_specs: Mapping[str, str] | None = None, vcpus: int = 1,
           memory_mb: int = 512, root_gb: int = 1) -> FlavorSpec:
    return FlavorSpec("f1", vcpus, memory_mb, root_gb, dict(extra_specs or {}))


def spec(image: Mapping[str, Any] | None = None, extra_specs: Mapping[str, str] | None = None,
         n: int = 1, **kwargs: Any) -> RequestSpec:
    return RequestSpec(
        instance_uuids=[f"00000000-0000-4000-8000-{i:012d}" for i in range(n)],
        project_id="p", user_id="u", flavor=flavor(extra_specs),
        image=dict(image if image is not None else {"id": "img", "disk_format": "raw"}),
        **kwargs)


def service(host: str, up: bool = True, disabled: bool = False) -> ComputeStatus:
    seen = utcnow() - datetime.timedelta(seconds=0 if up else 3600)
    return ComputeStatus(host=host, cell_id=7, disabled=disabled,
                         disabled_reason="maintenance" if disabled else None,
                         forced_down=False, last_seen_up=seen)


def host(name: str, aggregates: set[str] | None = None,
         catalog: AggregateCatalog | None = None, ram: int = 1024, disk: int = 10,
         svc: ComputeStatus | None = None, used_ram: int = 0) -> HostState:
    aggs = frozenset(aggregates or ())
    catalog = catalog or AggregateCatalog({})
    rp = provider_uuid(name)
    return HostState(
        host=name, provider_uuid=rp, service=svc if svc is not None else service(name),
        aggregates=aggs, metadata=catalog.host_metadata(aggs),
        resources={"VCPU": {"capacity": 4, "used": 0},
                   "MEMORY_MB": {"capacity": ram, "used": used_ram},
                   "DISK_GB": {"capacity": disk, "used": 0}},
        traits=frozenset(),
        allocation_request={"allocations": {rp: {"resources": {"VCPU": 1}}}})


def request(spec_: RequestSpec, catalog: AggregateCatalog | None = None) -> FilterRequest:
    return FilterRequest.of(spec_, catalog or AggregateCatalog({}))
