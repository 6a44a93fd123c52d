"""How a hypervisor is shown: Nova's view (nova/api/openstack/compute/hypervisors.py
``_view_hypervisor``) of a compute host, built from what fleetcache knows of it.

fleetcache has one node per compute host and no hypervisor to ask, so a hypervisor is the
``fleetcache-compute`` service (state, status, reason, the address it registered with) and the
Placement inventory the compute reported when it registered (``capabilities["inventory"]``,
which the conductor writes to the host's resource provider as given). ``vcpus``,
``memory_mb`` and ``local_gb`` are that inventory's totals (0 for a class the host reported
none of); the ``*_used`` figures add up the flavors of the servers on the host, as Nova's
resource tracker does; ``hypervisor_hostname`` is the host name, as servers show it in
``OS-EXT-SRV-ATTR:hypervisor_hostname``.

Differences from Nova: ``id`` is the compute service's (its integer id, or its uuid from 2.53)
rather than a compute node's; ``hypervisor_type`` is ``fleetcache``, ``hypervisor_version`` 1
and ``cpu_info`` empty. ``host_ip`` is the compute's ``[DEFAULT] my_ip`` (null for a compute
that registered without one).
"""

from __future__ import annotations

from typing import Any

import webob

from fleetcache.api import microversion, util
from fleetcache.common import servicegroup
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db.instances import InstanceDict
from fleetcache.common.db.services import ServiceDict
from fleetcache.compute.rpcapi import INVENTORY_CAPABILITY

CPU_INFO_OBJECT_VERSION = microversion.Version(2, 28)
UUID_ID_VERSION = microversion.Version(2, 53)
#: From 2.75 a hypervisor asked ``with_servers`` shows ``servers`` even when it has none.
EMPTY_SERVERS_VERSION = microversion.Version(2, 75)
HYPERVISOR_TYPE = "fleetcache"
HYPERVISOR_VERSION = 1
#: The resource figures of a hypervisor's detail, which ``/statistics`` adds up.
RESOURCE_FIELDS = ("vcpus", "memory_mb", "local_gb", "vcpus_used", "memory_mb_used",
                   "local_gb_used", "free_ram_mb", "free_disk_gb", "disk_available_least",
                   "current_workload", "running_vms")


def by_uuid(req: webob.Request) -> bool:
    """Whether the request's version shows (and takes) uuids as hypervisor ids."""
    return microversion.request_version(req).matches(UUID_ID_VERSION)


def shown_id(req: webob.Request, service: ServiceDict) -> int | str:
    return service["uuid"] if by_uuid(req) else service["id"]


def _total(service: ServiceDict, resource_class: str) -> int:
    record = (service["capabilities"] or {}).get(INVENTORY_CAPABILITY, {}).get(resource_class)
    return int(record["total"]) if isinstance(record, dict) and "total" in record else 0


def _used(instances: list[InstanceDict], *keys: str) -> int:
    return sum(int(i["flavor"].get(key) or 0) for i in instances for key in keys)


def resources(service: ServiceDict, instances: list[InstanceDict]) -> dict[str, int]:
    """The host's resource figures (:data:`RESOURCE_FIELDS`) with ``instances`` on it."""
    vcpus, memory_mb = _total(service, "VCPU"), _total(service, "MEMORY_MB")
    local_gb = _total(service, "DISK_GB")
    memory_used = _used(instances, "memory_mb")
    disk_used = _used(instances, "root_gb", "ephemeral_gb")
    return {
        "vcpus": vcpus, "memory_mb": memory_mb, "local_gb": local_gb,
        "vcpus_used": _used(instances, "vcpus"), "memory_mb_used": memory_used,
        "local_gb_used": disk_used, "free_ram_mb": memory_mb - memory_used,
        "free_disk_gb": local_gb - disk_used, "disk_available_least": local_gb - disk_used,
        "current_workload": sum(1 for i in instances if i["task_state"] is not None),
        "running_vms": len(instances),
    }


def _detail(req: webob.Request, service: ServiceDict,
            instances: list[InstanceDict]) -> dict[str, Any]:
    cpu_info: Any = {}
    if not microversion.request_version(req).matches(CPU_INFO_OBJECT_VERSION):
        cpu_info = "{}"
    return {
        "hypervisor_type": HYPERVISOR_TYPE, "hypervisor_version": HYPERVISOR_VERSION,
        "host_ip": service["host_ip"],
        "service": {"id": shown_id(req, service), "host": service["host"],
                    "disabled_reason": service["disabled_reason"]},
        **resources(service, instances),
        "cpu_info": cpu_info,
    }


def hypervisor(req: webob.Request, service: ServiceDict, instances: list[InstanceDict],
               detail: bool = False, with_servers: bool = False) -> dict[str, Any]:
    """One hypervisor as Nova shows it at the request's version.

    :param instances: the servers on the host.
    :param with_servers: list them (``servers``: name and uuid); from 2.75 even when empty.
    """
    conf = util.get_state(req).conf
    body: dict[str, Any] = {
        "id": shown_id(req, service),
        "hypervisor_hostname": service["host"],
        "state": "up" if servicegroup.service_is_up(service, conf.service_down_time)
        else "down",
        "status": "disabled" if service["disabled"] else "enabled",
    }
    if detail:
        body.update(_detail(req, service, instances))
    if with_servers and (instances or microversion.request_version(req).matches(
            EMPTY_SERVERS_VERSION)):
        body["servers"] = [{"name": i["display_name"], "uuid": i["uuid"]} for i in instances]
    return body


def instances_by_host(req: webob.Request) -> dict[str, list[InstanceDict]]:
    """The servers (not deleted) of every host, by host name."""
    on_host: dict[str, list[InstanceDict]] = {}
    for instance in db_instances.instance_list(util.get_state(req).db):
        if instance["host"]:
            on_host.setdefault(instance["host"], []).append(instance)
    return on_host
