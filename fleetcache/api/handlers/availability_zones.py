"""``/os-availability-zone``: the zones, as Nova's (nova/api/openstack/compute/
availability_zone.py and nova/availability_zones.py).

A zone is where a service is: a compute's is the ``availability_zone`` of its aggregates, else
``default_availability_zone``; every other service is in
``internal_service_availability_zone`` (see :mod:`.services`). So, as in Nova, an aggregate's
zone is listed once a compute host is in it, and an aggregate without hosts adds no zone. A
zone is available while one of its services is enabled, and listed unavailable when all of its
services are disabled.

The list (anyone) leaves the internal zone out and shows no hosts; the detail (admins) lists
every zone, with each enabled service by host under Nova's name (``nova-compute``):
``available`` (its heartbeat is recent), ``active`` (enabled) and ``updated_at``.
"""

from __future__ import annotations

from typing import Any

import webob

from fleetcache.api import policy, util
from fleetcache.api.handlers import services as service_views
from fleetcache.api.policies import availability_zones as policies
from fleetcache.common import servicegroup
from fleetcache.common.db import services as db_services
from fleetcache.common.db.services import ServiceDict


def _zones(req: webob.Request) -> tuple[list[tuple[str, ServiceDict]], list[str]]:
    """The enabled services with their zone, and the zones that have only disabled ones,
    each in the services' order (Nova's ``get_availability_zones``)."""
    zones = service_views.host_zones(req)
    enabled: list[tuple[str, ServiceDict]] = []
    disabled: list[str] = []
    for service in db_services.service_list(util.get_state(req).db):
        zone = service_views.service_zone(req, service, zones)
        if service["disabled"]:
            disabled.append(zone)
        else:
            enabled.append((zone, service))
    available = {zone for zone, _ in enabled}
    return enabled, list(dict.fromkeys(z for z in disabled if z not in available))


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


def list_availability_zones(req: webob.Request) -> webob.Response:
    """List the availability zones and whether each is available (the internal zone left
    out)."""
    policy.authorize(util.get_state(req).enforcer, util.get_context(req), policies.LIST)
    enabled, unavailable = _zones(req)
    internal = util.get_state(req).conf.internal_service_availability_zone
    info = [{"zoneName": zone, "zoneState": {"available": True}, "hosts": None}
            for zone in _unique([z for z, _ in enabled]) if zone != internal]
    info += [{"zoneName": zone, "zoneState": {"available": False}, "hosts": None}
             for zone in unavailable if zone != internal]
    return util.json_response({"availabilityZoneInfo": info})


def list_availability_zones_detail(req: webob.Request) -> webob.Response:
    """List every availability zone with the enabled services of each host."""
    policy.authorize(util.get_state(req).enforcer, util.get_context(req), policies.DETAIL)
    enabled, unavailable = _zones(req)
    down_time = util.get_state(req).conf.service_down_time
    hosts: dict[str, dict[str, dict[str, Any]]] = {}
    for zone, service in enabled:
        binary = service_views.shown_binary(service["binary"])
        hosts.setdefault(zone, {}).setdefault(service["host"], {})[binary] = {
            "available": servicegroup.service_is_up(service, down_time),
            "active": not service["disabled"],
            "updated_at": util.format_time(service["last_seen_up"] or service["updated_at"]),
        }
    info: list[dict[str, Any]] = [
        {"zoneName": zone, "zoneState": {"available": True}, "hosts": zone_hosts}
        for zone, zone_hosts in hosts.items()]
    info += [{"zoneName": zone, "zoneState": {"available": False}, "hosts": None}
             for zone in unavailable]
    return util.json_response({"availabilityZoneInfo": info})
