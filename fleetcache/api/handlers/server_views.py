"""How a server is shown: Nova's view (nova/api/openstack/compute/views/servers.py) for the
fields fleetcache has.

There is no hypervisor and no network: ``addresses`` is empty, ``power_state`` is 1
(running) when the disk exists. Admins (``os_compute_api:os-extended-server-attributes``) see
``OS-EXT-SRV-ATTR:host`` and ``hypervisor_hostname`` (the compute's host name: one node per
host) and a fault's ``details``, which for a failed schedule say which filter removed how many
hosts. What the owner said of the server (``description`` from 2.19, ``metadata``, access
addresses, disk config) is shown as stored.

``PUT /servers/{id}`` and ``rebuild`` answer with :func:`format_changed`: below 2.75 Nova's
shorter view (no zone, usage times, extended states or attributes, volumes, key, config
drive), from 2.75 the whole server as ``GET`` shows it.
"""

from __future__ import annotations

import hashlib
from typing import Any

import webob

from fleetcache.api import microversion, policy, util
from fleetcache.api.handlers.flavors import links
from fleetcache.api.policies import flavors as flavor_policies
from fleetcache.api.policies import servers as policies
from fleetcache.common import exception, instance_states
from fleetcache.common.db.instances import InstanceDict

DESCRIPTION_VERSION = microversion.Version(2, 19)
FLAVOR_EMBEDDED_VERSION = microversion.Version(2, 47)
#: From 2.75 ``PUT /servers/{id}`` and ``rebuild`` answer with every attribute (Nova).
CHANGED_ALL_ATTRIBUTES_VERSION = microversion.Version(2, 75)
#: Nova's power states: NOSTATE, RUNNING and SHUTDOWN.
_NOSTATE, _RUNNING, _SHUTDOWN = 0, 1, 4
_POWER_STATES = {instance_states.ACTIVE: _RUNNING, instance_states.STOPPED: _SHUTDOWN}


def _allowed(req: webob.Request, rule: str) -> bool:
    try:
        policy.authorize(util.get_state(req).enforcer, util.get_context(req), rule)
    except exception.PolicyNotAuthorized:
        return False
    return True


def _host_id(instance: InstanceDict) -> str:
    """Nova's ``hostId``: the same for a project's servers on one host, opaque across
    projects."""
    host = instance["host"]
    if not host:
        return ""
    seed = f"{instance['project_id'] or ''}{host}".encode()
    return hashlib.sha224(seed).hexdigest()


def _flavor(req: webob.Request, instance: InstanceDict) -> dict[str, Any]:
    flavor = instance["flavor"]
    if not microversion.request_version(req).matches(FLAVOR_EMBEDDED_VERSION):
        return {"id": flavor["flavorid"], "links": links(req, "flavors", flavor["flavorid"])[1:]}
    body: dict[str, Any] = {
        "vcpus": flavor["vcpus"], "ram": flavor["memory_mb"], "disk": flavor["root_gb"],
        "ephemeral": flavor.get("ephemeral_gb", 0), "swap": flavor.get("swap", 0),
        "original_name": flavor["name"],
    }
    if _allowed(req, flavor_policies.SPECS_ROOT % "index"):
        body["extra_specs"] = dict(flavor.get("extra_specs") or {})
    return body


def _fault(instance: InstanceDict, admin: bool) -> dict[str, Any] | None:
    if instance["fault_message"] is None:
        return None
    fault: dict[str, Any] = {
        "code": instance["fault_code"] or 500,
        "created": util.format_time(instance["fault_created_at"]),
        "message": instance["fault_message"],
    }
    # Nova shows the details to admins, and to everyone for a fault that is not a 500.
    if admin or fault["code"] != 500:
        fault["details"] = instance["fault_details"] or ""
    return fault


def format_summary(req: webob.Request, instance: InstanceDict) -> dict[str, Any]:
    """A server in a plain list: id, name, links."""
    return {"id": instance["uuid"], "name": instance["display_name"],
            "links": links(req, "servers", instance["uuid"])}


def disk_config(instance: InstanceDict) -> str:
    """Nova's ``OS-DCF:diskConfig`` of a server."""
    return "AUTO" if instance["auto_disk_config"] else "MANUAL"


def _common(req: webob.Request, instance: InstanceDict, status: str) -> dict[str, Any]:
    """What every full view of a server holds (Nova's ``show`` with every ``show_*`` off)."""
    body: dict[str, Any] = {
        **format_summary(req, instance),
        "status": status,
        "tenant_id": instance["project_id"] or "",
        "user_id": instance["user_id"] or "",
        "metadata": dict(instance["metadata"]),
        "hostId": _host_id(instance),
        "image": {"id": instance["image_ref"],
                  "links": links(req, "images", instance["image_ref"])[1:]},
        "flavor": _flavor(req, instance),
        "created": util.format_time(instance["created_at"]),
        "updated": util.format_time(instance["updated_at"] or instance["created_at"]),
        "addresses": {},
        "accessIPv4": instance["access_ip_v4"] or "",
        "accessIPv6": instance["access_ip_v6"] or "",
        "OS-DCF:diskConfig": disk_config(instance),
    }
    if microversion.request_version(req).matches(DESCRIPTION_VERSION):
        body["description"] = instance["display_description"]
    if status in ("BUILD", "ACTIVE", "REBUILD"):
        body["progress"] = 100 if status == "ACTIVE" else 0
    return body


def format_changed(req: webob.Request, instance: InstanceDict) -> dict[str, Any]:
    """A server as ``PUT /servers/{id}`` and ``rebuild`` answer it (see the module)."""
    if microversion.request_version(req).matches(CHANGED_ALL_ATTRIBUTES_VERSION):
        return format_server(req, instance)
    status = instance_states.status_from_state(instance["vm_state"], instance["task_state"])
    body = _common(req, instance, status)
    if status == "ERROR":
        fault = _fault(instance, _allowed(req, policies.EXTENDED_ATTRIBUTES))
        if fault is not None:
            body["fault"] = fault
    return body


def format_server(req: webob.Request, instance: InstanceDict) -> dict[str, Any]:
    """A server in full, as ``GET /servers/{id}`` shows it to the caller."""
    status = instance_states.status_from_state(instance["vm_state"], instance["task_state"])
    body: dict[str, Any] = {
        **_common(req, instance, status),
        "OS-EXT-AZ:availability_zone": instance["availability_zone"] or "",
        "config_drive": "",
        "key_name": None,
        "OS-SRV-USG:launched_at": util.format_time(instance["launched_at"]),
        "OS-SRV-USG:terminated_at": util.format_time(instance["terminated_at"]),
        "OS-EXT-STS:vm_state": instance["vm_state"],
        "OS-EXT-STS:task_state": instance["task_state"],
        "OS-EXT-STS:power_state": _POWER_STATES.get(instance["vm_state"], _NOSTATE),
        "os-extended-volumes:volumes_attached": [],
    }
    admin = _allowed(req, policies.EXTENDED_ATTRIBUTES)
    if admin:
        body["OS-EXT-SRV-ATTR:host"] = instance["host"]
        body["OS-EXT-SRV-ATTR:hypervisor_hostname"] = instance["node"]
        body["OS-EXT-SRV-ATTR:instance_name"] = f"instance-{instance['id']:08x}"
    if status == "ERROR":
        fault = _fault(instance, admin)
        if fault is not None:
            body["fault"] = fault
    return body
