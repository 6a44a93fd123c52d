"""``/os-hypervisors``: the compute hosts as Nova's hypervisors
(nova/api/openstack/compute/hypervisors.py, below 2.88: with their resources).

What a hypervisor is made of is :mod:`.hypervisor_views`'s; this module serves Nova's routes
at Nova's microversions, admins only by default:

* the list and the detail (``limit``/``marker`` from 2.33; from 2.53 uuid ids,
  ``hypervisor_hostname_pattern`` and ``with_servers``, and no other query parameter);
* ``/os-hypervisors/{id}`` (an integer id below 2.53, else 404; a uuid from 2.53, else 400;
  ``with_servers`` from 2.53);
* ``/os-hypervisors/statistics``: the enabled computes' figures added up, as Nova's;
* ``/os-hypervisors/{pattern}/search`` and ``/{pattern}/servers`` below 2.53 (404 from 2.53,
  where the list's query parameters replace them); a pattern no host name holds is 404.

``/os-hypervisors/{id}/uptime`` asks the compute itself (:mod:`.hypervisor_uptime`).
"""

from __future__ import annotations

from collections.abc import Callable

import webob
import webob.exc
from oslo_utils import strutils, uuidutils

from fleetcache.api import microversion, pagination, policy, util, validation
from fleetcache.api.handlers import hypervisor_views as views
from fleetcache.api.policies import hypervisors as policies
from fleetcache.api.schemas import hypervisors as schemas
from fleetcache.common import binaries
from fleetcache.common.db import services as db_services
from fleetcache.common.db.services import ServiceDict

PAGING_VERSION = microversion.Version(2, 33)
LEGACY_ROUTES_MAX = "2.52"


def authorize(req: webob.Request, rule: str) -> None:
    policy.authorize(util.get_state(req).enforcer, util.get_context(req), rule)


def _marker_key(req: webob.Request) -> Callable[[ServiceDict], str]:
    """What a marker names: the id the request's version shows."""
    if views.by_uuid(req):
        return lambda service: service["uuid"]
    return lambda service: str(service["id"])


def _with_servers(req: webob.Request) -> bool:
    """Nova's 2.53 ``with_servers`` (validated by the query schema); False below 2.53."""
    if not views.by_uuid(req):
        return False
    return strutils.bool_from_string(req.GET.get("with_servers", "false"), strict=True)


def _computes(req: webob.Request) -> list[ServiceDict]:
    return db_services.service_list(util.get_state(req).db, binary=binaries.COMPUTE)


def matching(req: webob.Request, pattern: str) -> list[ServiceDict]:
    """The computes whose host name holds ``pattern`` (Nova's ``LIKE %pattern%``).

    :raises webob.exc.HTTPNotFound: when none does.
    """
    found = [s for s in _computes(req) if pattern in s["host"]]
    if not found:
        raise webob.exc.HTTPNotFound(
            explanation=f"No hypervisor matching '{pattern[:255]}' could be found.")
    return found


def _list(req: webob.Request, detail: bool) -> webob.Response:
    authorize(req, policies.LIST_DETAIL if detail else policies.LIST)
    pattern = None
    if views.by_uuid(req):
        validation.validate_query(req, schemas.INDEX_QUERY_V2_53)
        pattern = req.GET.get("hypervisor_hostname_pattern")
    with_servers = _with_servers(req)
    paging = microversion.request_version(req).matches(PAGING_VERSION)
    limit, marker = pagination.limit_and_marker(req) if paging else (pagination.MAX_LIMIT, None)
    if pattern is not None:
        if "limit" in req.GET or marker:
            raise webob.exc.HTTPBadRequest(
                explanation="Paging over hypervisors with the hypervisor_hostname_pattern "
                "query parameter is not supported.")
        computes = matching(req, pattern)
    else:
        computes = _computes(req)
    key = _marker_key(req)
    shown = pagination.after_marker(computes, key, marker)[:limit]
    on_host = views.instances_by_host(req)
    hypervisors = [views.hypervisor(req, s, on_host.get(s["host"], []), detail, with_servers)
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


def find(req: webob.Request, hypervisor_id: str) -> ServiceDict:
    """The compute a hypervisor id names, as Nova's ``_validate_id`` and look-up.

    :raises webob.exc.HTTPBadRequest: from 2.53, for an id that is not a uuid.
    :raises webob.exc.HTTPNotFound: below 2.53 for an id that is not an integer; for an id
        no compute has.
    """
    missing = webob.exc.HTTPNotFound(
        explanation=f"Hypervisor with ID '{hypervisor_id[:64]}' could not be found.")
    ident: int | str
    if views.by_uuid(req):
        if not uuidutils.is_uuid_like(hypervisor_id):
            raise webob.exc.HTTPBadRequest(explanation=f"Invalid uuid {hypervisor_id[:64]}")
        ident = hypervisor_id
    else:
        number = util.int_id(hypervisor_id)
        if number is None:
            raise missing
        ident = number
    service = db_services.service_find(util.get_state(req).db, binaries.COMPUTE, ident)
    if service is None:
        raise missing
    return service


def get_hypervisor(req: webob.Request) -> webob.Response:
    """Show a hypervisor with its service and resources (``with_servers`` from 2.53)."""
    authorize(req, policies.SHOW)
    if views.by_uuid(req):
        validation.validate_query(req, schemas.SHOW_QUERY_V2_53)
    service = find(req, req.urlvars["hypervisor_id"])
    instances = views.instances_by_host(req).get(service["host"], [])
    return util.json_response({"hypervisor": views.hypervisor(
        req, service, instances, detail=True, with_servers=_with_servers(req))})


def get_hypervisor_statistics(req: webob.Request) -> webob.Response:
    """The resources of the enabled hypervisors added up, and how many there are."""
    authorize(req, policies.STATISTICS)
    enabled = [s for s in _computes(req) if not s["disabled"]]
    on_host = views.instances_by_host(req)
    totals = dict.fromkeys(views.RESOURCE_FIELDS, 0)
    for service in enabled:
        for field, value in views.resources(service, on_host.get(service["host"], [])).items():
            totals[field] += value
    return util.json_response({"hypervisor_statistics": {"count": len(enabled), **totals}})


@microversion.version_handler("2.1", LEGACY_ROUTES_MAX)
def search_hypervisors(req: webob.Request) -> webob.Response:
    """List the hypervisors whose host name holds the given text (below 2.53)."""
    authorize(req, policies.SEARCH)
    found = matching(req, req.urlvars["hypervisor_hostname_pattern"])
    return util.json_response({"hypervisors": [views.hypervisor(req, s, []) for s in found]})


@microversion.version_handler("2.1", LEGACY_ROUTES_MAX)
def list_hypervisor_servers(req: webob.Request) -> webob.Response:
    """List the hypervisors whose host name holds the given text, with their servers (below
    2.53)."""
    authorize(req, policies.SERVERS)
    found = matching(req, req.urlvars["hypervisor_hostname_pattern"])
    on_host = views.instances_by_host(req)
    return util.json_response({"hypervisors": [
        views.hypervisor(req, s, on_host.get(s["host"], []), with_servers=True)
        for s in found]})
