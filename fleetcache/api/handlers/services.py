"""``GET /os-services``: the services that registered, with state, status and zone (as Nova).

A service is ``up`` while its last heartbeat is younger than ``[DEFAULT] service_down_time``.
A compute agent's zone is the availability zone of its aggregates (joined with ``,`` when it
is in several), else ``default_availability_zone``; other services are in
``internal_service_availability_zone``.

A compute the conductor has not yet written to Placement (just registered, or Placement
unreachable) is not schedulable: while it is enabled, its ``disabled_reason`` says so
(:data:`NOT_IN_PLACEMENT`), the one free-text field of Nova's service shape, so the unmodified
clients show it (``openstack compute service list --long``).

Services are shown under Nova's name of the part they play (``fleetcache-compute`` as
``nova-compute``, ``fleetcache-conductor`` as ``nova-conductor``:
:data:`fleetcache.common.binaries.NOVA_NAMES`), as a Nova-compatible API must: clients, Tempest
and operators' tools look for compute hosts as ``nova-compute``. The ``binary`` filter takes
either name.
"""

from __future__ import annotations

from typing import Any

import webob

from fleetcache.api import microversion, policy, util
from fleetcache.api.policies import services as policies
from fleetcache.common import binaries, servicegroup
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import services as db_services
from fleetcache.common.db.services import ServiceDict

FORCED_DOWN_VERSION = microversion.Version(2, 11)
UUID_ID_VERSION = microversion.Version(2, 53)

NOT_IN_PLACEMENT = "not schedulable: not yet reported to Placement"
#: Nova's binary names -> the fleetcache service that plays the same part.
_FLEETCACHE_NAMES = {nova: ours for ours, nova in binaries.NOVA_NAMES.items()}


def shown_binary(binary: str) -> str:
    """The name the compute API shows a service under: Nova's for the part it plays."""
    return binaries.NOVA_NAMES.get(binary, binary)


def host_zones(req: webob.Request) -> dict[str, str]:
    """Each host's availability zone from its aggregates (joined with ``,`` when several)."""
    zones: dict[str, set[str]] = {}
    for aggregate in db_aggregates.aggregate_list(util.get_state(req).db):
        zone = aggregate["availability_zone"]
        if zone:
            for host in aggregate["hosts"]:
                zones.setdefault(host, set()).add(zone)
    return {host: ",".join(sorted(names)) for host, names in zones.items()}


def service_zone(req: webob.Request, service: ServiceDict, zones: dict[str, str]) -> str:
    """A service's zone, as Nova's ``set_availability_zones``: a compute's from
    :func:`host_zones`, else ``default_availability_zone``; any other service's is
    ``internal_service_availability_zone``."""
    conf = util.get_state(req).conf
    if service["binary"] == binaries.COMPUTE:
        return zones.get(service["host"], str(conf.default_availability_zone))
    return str(conf.internal_service_availability_zone)


def _format_service(
    req: webob.Request, service: ServiceDict, zones: dict[str, str]
) -> dict[str, Any]:
    conf = util.get_state(req).conf
    version = microversion.request_version(req)
    zone = service_zone(req, service, zones)
    is_up = servicegroup.service_is_up(service, conf.service_down_time)
    reason = service["disabled_reason"]
    if (service["binary"] == binaries.COMPUTE and not service["disabled"]
            and service["placement_synced_at"] is None):
        reason = NOT_IN_PLACEMENT
    body: dict[str, Any] = {
        "id": service["uuid"] if version.matches(UUID_ID_VERSION) else service["id"],
        "binary": shown_binary(service["binary"]),
        "host": service["host"],
        "zone": zone,
        "status": "disabled" if service["disabled"] else "enabled",
        "state": "up" if is_up else "down",
        "updated_at": util.format_time(service["last_seen_up"] or service["updated_at"]),
        "disabled_reason": reason,
    }
    if version.matches(FORCED_DOWN_VERSION):
        body["forced_down"] = service["forced_down"]
    return body


def list_services(req: webob.Request) -> webob.Response:
    """List services, optionally only those on ``host`` or of ``binary`` (Nova's name or
    fleetcache's)."""
    policy.authorize(util.get_state(req).enforcer, util.get_context(req), policies.LIST)
    host = req.GET.get("host")
    binary = req.GET.get("binary")
    if binary is not None:
        binary = _FLEETCACHE_NAMES.get(binary, binary)
    services = db_services.service_list(
        util.get_state(req).db, binary=binary, hosts=[host] if host else None
    )
    zones = host_zones(req)
    return util.json_response({"services": [_format_service(req, s, zones) for s in services]})
