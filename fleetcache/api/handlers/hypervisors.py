"""``/os-hypervisors``: the compute hosts as Nova's hypervisors
(nova/api/openstack/compute/hypervisors.py, below 2.88: with their resources).

fleetcache has one node per compute host and no hypervisor to ask, so a hypervisor is built
from what fleetcache knows: the ``fleetcache-compute`` service (state, status, reason) and the
Placement inventory the compute reported when it registered (``capabilities["inventory"]``,
which the conductor writes to the host's resource provider as given). ``vcpus``,
``memory_mb`` and ``local_gb`` are that inventory's totals (0 for a class the host reported
none of); the ``*_used`` figures add up the flavors of the servers on the host, as Nova's
resource tracker does; ``hypervisor_hostname`` is the host name, as servers show it in
``OS-EXT-SRV-ATTR:hypervisor_hostname``.

Differences from Nova: ``id`` is the compute service's (its integer id, or its uuid from 2.53)
rather than a compute node's; ``hypervisor_type`` is ``fleetcache``, ``hypervisor_version`` 1,
``host_ip`` empty (the service records no address) and ``cpu_info`` empty.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import webob
import webob.exc
from oslo_utils import strutils

from fleetcache.api import microversion, pagination, policy, util
from fleetcache.api.policies import hypervisors as policies
from fleetcache.common import binaries, servicegroup
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db import services as db_services
from fleetcache.common.db.instances import InstanceDict
from fleetcache.common.db.services import ServiceDict
from fleetcache.compute.rpcapi import INVENTORY_CAPABILITY

CPU_INFO_OBJECT_VERSION = microversion.Version(2, 28)
PAGING_VERSION = microversion.Version(2, 33)
UUID_ID_VERSION = microversion.Version(2, 53)
HYPERVISOR_TYPE = "fleetcache"
HYPERVISOR_VERSION = 1


def _total(service: ServiceDict, resource_class: str) -> int:
    record = (service["capabilities"] or {}).get(INVENTORY_CAPABILITY, {}).get(resource_class)
    return int(record["total"]) if isinstance(record, dict) and "total" in record else 0


def _used(instances: list[InstanceDict], *keys: str) -> int:
    return sum(int(i["flavor"].get(key) or 0) for i in instances for key in keys)


def _resources(req: webob.Request, service: ServiceDict,
               instances: list[InstanceDict]) -> dict[str, Any]:
    vcpus, memory_mb = _total(service, "VCPU"), _total(service, "MEMORY_MB")
    local_gb = _total(service, "DISK_GB")
    memory_used = _used(instances, "memory_mb")
    disk_used = _used(instances, "root_gb", "ephemeral_gb")
    cpu_info: Any = {}
    if not microversion.request_version(req).matches(CPU_INFO_OBJECT_VERSION):
        cpu_info = "{}"
    return {
        "hypervisor_type": HYPERVISOR_TYPE, "hypervisor_version": HYPERVISOR_VERSION,
        "host_ip": "",
        "vcpus": vcpus, "memory_mb": memory_mb, "local_gb": local_gb,
        "vcpus_used": _used(instances, "vcpus"), "memory_mb_used": memory_used,
        "local_gb_used": disk_used, "free_ram_mb": memory_mb - memory_used,
        "free_disk_gb": local_gb - disk_used, "disk_available_least": local_gb - disk_used,
        "current_workload": sum(1 for i in instances if i["task_state"] is not None),
        "running_vms": len(instances), "cpu_info": cpu_info,
    }


def _format(req: webob.Request, service: ServiceDict, instances: list[InstanceDict],
            detail: bool, with_servers: bool) -> dict[str, Any]:
    conf = util.get_state(req).conf
    by_uuid = microversion.request_version(req).matches(UUID_ID_VERSION)
    ident = service["uuid"] if by_uuid else service["id"]
    body: dict[str, Any] = {
        "id": ident,
        "hypervisor_hostname": service["host"],
        "state": "up" if servicegroup.service_is_up(service, conf.service_down_time)
        else "down",
        "status": "disabled" if service["disabled"] else "enabled",
    }
    if detail:
        body["service"] = {"id": ident, "host": service["host"],
                           "disabled_reason": service["disabled_reason"]}
        body.update(_resources(req, service, instances))
    if with_servers:
        body["servers"] = [{"name": i["display_name"], "uuid": i["uuid"]} for i in instances]
    return body


def _marker_key(req: webob.Request) -> Callable[[ServiceDict], str]:
    """What a marker names: the id the request's version shows."""
    if microversion.request_version(req).matches(UUID_ID_VERSION):
        return lambda service: service["uuid"]
    return lambda service: str(service["id"])


def _query(req: webob.Request) -> tuple[str | None, bool]:
    """Nova's 2.53 query: ``hypervisor_hostname_pattern`` and ``with_servers``.

    :raises webob.exc.HTTPBadRequest: for a ``with_servers`` that is not a boolean.
    """
    if not microversion.request_version(req).matches(UUID_ID_VERSION):
        return None, False
    raw = req.GET.get("with_servers", "false")
    try:
        with_servers = strutils.bool_from_string(raw, strict=True)
    except ValueError as exc:
        raise webob.exc.HTTPBadRequest(
            explanation=f"Invalid with_servers value [{raw[:64]}]") from exc
    return req.GET.get("hypervisor_hostname_pattern"), with_servers


def _list(req: webob.Request, detail: bool) -> webob.Response:
    policy.authorize(util.get_state(req).enforcer, util.get_context(req),
                     policies.LIST_DETAIL if detail else policies.LIST)
    pattern, with_servers = _query(req)
    db = util.get_state(req).db
    computes = db_services.service_list(db, binary=binaries.COMPUTE)
    paging = microversion.request_version(req).matches(PAGING_VERSION)
    limit, marker = pagination.limit_and_marker(req) if paging else (pagination.MAX_LIMIT, None)
    if pattern is not None:
        if "limit" in req.GET or marker:
            raise webob.exc.HTTPBadRequest(
                explanation="Paging over hypervisors with the hypervisor_hostname_pattern "
                "query parameter is not supported.")
        computes = [s for s in computes if pattern in s["host"]]
        if not computes:
            raise webob.exc.HTTPNotFound(
                explanation=f"No hypervisor matching '{pattern[:255]}' could be found.")
    key = _marker_key(req)
    shown = pagination.after_marker(computes, key, marker)[:limit]
    on_host: dict[str, list[InstanceDict]] = {}
    for instance in db_instances.instance_list(db):
        if instance["host"]:
            on_host.setdefault(instance["host"], []).append(instance)
    hypervisors = [_format(req, s, on_host.get(s["host"], []), detail, with_servers)
                   for s in shown]
    links = pagination.links(req, "hypervisors", shown, limit, key) if pattern is None else {}
    return util.json_response({"hypervisors": hypervisors, **links})


def list_hypervisors(req: webob.Request) -> webob.Response:
    """List the hypervisors (the compute hosts): id, hostname, state, status."""
    return _list(req, detail=False)


def list_hypervisors_detail(req: webob.Request) -> webob.Response:
    """List the hypervisors with their service and resources (the Placement inventory the
    compute reported, and what its servers use)."""
    return _list(req, detail=True)
