"""``/flavors``: flavors, shaped as Nova's (nova/api/openstack/compute/flavors.py, flavor_manage.py
and views/flavors.py).

Anyone lists and shows flavors; admins create, describe (2.55) and delete them. A non-admin
sees the public flavors and the private ones shared with their project (flavor access,
:mod:`.flavor_access`); an admin sees every flavor, and lists the public ones and those shared
with their project unless ``is_public`` says otherwise. Deleting a flavor leaves the servers
built with it as they are: each keeps a snapshot.

Requests take what Nova's take: numbers as integers or digit strings, ``is_public`` as any of
Nova's boolean strings, the id as a string or a number (stored as its text).

The list takes Nova's ``minRam`` and ``minDisk`` filters and pages with ``limit`` and
``marker`` (a flavor id) as Nova does (:mod:`fleetcache.api.pagination`).

Differences from Nova: the list comes in creation order, not sorted by flavor id, and
``sort_key``/``sort_dir`` are ignored. ``rxtx_factor`` is kept and shown as Nova does (1.0 when
not given), though fleetcache has no network for it to scale.
"""

from __future__ import annotations

import re
from typing import Any

import webob
from oslo_utils import strutils

from fleetcache.api import microversion, pagination, policy, util, validation
from fleetcache.api.policies import flavors as policies
from fleetcache.api.schemas import flavors as schemas
from fleetcache.api.schemas import parameter_types
from fleetcache.common import exception
from fleetcache.common.db import flavors as db_flavors
from fleetcache.common.db.flavors import FlavorDict

DESCRIPTION_VERSION = microversion.Version(2, 55)
EXTRA_SPECS_VERSION = microversion.Version(2, 61)
SWAP_ZERO_VERSION = microversion.Version(2, 75)
#: What ``minRam`` / ``minDisk`` may be: an integer as Nova's ``int()`` reads it, short
#: enough to stay a number a database column can compare.
_MIN_FILTER = re.compile(r"[-+]?[0-9]{1,18}")


def authorize(req: webob.Request, rule: str) -> None:
    policy.authorize(util.get_state(req).enforcer, util.get_context(req), rule)


def is_admin(req: webob.Request) -> bool:
    return policy.is_admin(util.get_state(req).enforcer, util.get_context(req))


def links(req: webob.Request, collection: str, ident: str) -> list[dict[str, str]]:
    """Nova's ``self`` and ``bookmark`` links of a resource."""
    base = util.base_url(req)
    return [{"rel": "self", "href": f"{base}/v2.1/{collection}/{ident}"},
            {"rel": "bookmark", "href": f"{base}/{collection}/{ident}"}]


def _may_see_specs(req: webob.Request) -> bool:
    try:
        authorize(req, policies.SPECS_ROOT % "index")
    except exception.PolicyNotAuthorized:
        return False
    return True


def format_flavor(req: webob.Request, flavor: FlavorDict, detail: bool = True) -> dict[str, Any]:
    """One flavor as Nova shows it at the request's version."""
    version = microversion.request_version(req)
    body: dict[str, Any] = {"id": flavor["flavorid"], "name": flavor["name"]}
    if detail:
        no_swap: int | str = 0 if version.matches(SWAP_ZERO_VERSION) else ""
        body.update({
            "ram": flavor["memory_mb"], "disk": flavor["root_gb"], "vcpus": flavor["vcpus"],
            "OS-FLV-EXT-DATA:ephemeral": flavor["ephemeral_gb"],
            "OS-FLV-DISABLED:disabled": False,
            "swap": flavor["swap"] or no_swap,
            "rxtx_factor": flavor["rxtx_factor"],
            "os-flavor-access:is_public": flavor["is_public"],
        })
    body["links"] = links(req, "flavors", flavor["flavorid"])
    if version.matches(DESCRIPTION_VERSION):
        body["description"] = flavor["description"]
    if detail and version.matches(EXTRA_SPECS_VERSION) and _may_see_specs(req):
        body["extra_specs"] = dict(flavor["extra_specs"])
    return body


def get_visible(req: webob.Request, flavorid: str) -> FlavorDict:
    """The flavor, if the caller may see it: a public flavor, one shared with the caller's
    project, or any flavor for an admin. :raises FlavorNotFound:"""
    db = util.get_state(req).db
    flavor = db_flavors.flavor_get(db, flavorid)
    if not flavor["is_public"] and not is_admin(req):
        project_id = util.get_context(req).project_id
        if project_id is None or project_id not in db_flavors.flavor_projects(db, flavorid):
            raise exception.FlavorNotFound(flavor_id=flavorid)
    return flavor


def _is_public_filter(req: webob.Request) -> bool | None:
    """Nova's ``is_public`` query: ``true`` (default: the public flavors and those shared with
    the caller's project), ``false`` or ``none`` (both), the last two for admins only (others
    always get the first).

    :raises InvalidInput: for another value.
    """
    raw = req.GET.get("is_public")
    if not is_admin(req):
        return True
    if raw is None:
        return True
    if raw.strip().lower() == "none":
        return None
    try:
        return strutils.bool_from_string(raw, strict=True)
    except ValueError as exc:
        raise exception.InvalidInput(reason=f"Invalid is_public filter [{raw}]") from exc


def _min_filter(req: webob.Request, name: str) -> int | None:
    """Nova's ``minRam`` / ``minDisk``: an integer. :raises InvalidInput: for another value."""
    raw = req.GET.get(name)
    if raw is None:
        return None
    text = raw.strip()
    if _MIN_FILTER.fullmatch(text) is None:
        raise exception.InvalidInput(reason=f"Invalid {name} filter [{raw[:64]}]")
    return int(text)


def _flavorid(flavor: FlavorDict) -> str:
    return flavor["flavorid"]


def _list(req: webob.Request, detail: bool) -> webob.Response:
    authorize(req, policies.LIST)
    limit, marker = pagination.limit_and_marker(req)
    min_ram, min_disk = _min_filter(req, "minRam"), _min_filter(req, "minDisk")
    flavors = db_flavors.flavor_list(util.get_state(req).db, is_public=_is_public_filter(req),
                                     project_id=util.get_context(req).project_id)
    shown = [f for f in pagination.after_marker(flavors, _flavorid, marker)
             if (min_ram is None or f["memory_mb"] >= min_ram)
             and (min_disk is None or f["root_gb"] >= min_disk)][:limit]
    return util.json_response({
        "flavors": [format_flavor(req, f, detail) for f in shown],
        **pagination.links(req, "flavors", shown, limit, _flavorid),
    })


def list_flavors(req: webob.Request) -> webob.Response:
    """List flavors: id, name and links (``?is_public=none`` shows admins every flavor;
    ``minRam``, ``minDisk``, ``limit``, ``marker`` as Nova)."""
    return _list(req, detail=False)


def list_flavors_detail(req: webob.Request) -> webob.Response:
    """List flavors with their resources."""
    return _list(req, detail=True)


def get_flavor(req: webob.Request) -> webob.Response:
    """Show a flavor."""
    authorize(req, policies.LIST)
    flavor = get_visible(req, req.urlvars["flavor_id"])
    return util.json_response({"flavor": format_flavor(req, flavor)})


def create_flavor(req: webob.Request) -> webob.Response:
    """Create a flavor (200 with the flavor, as Nova); its id is generated when not given."""
    authorize(req, policies.MANAGE_ROOT % "create")
    version = microversion.request_version(req)
    schema = schemas.CREATE_V2_55 if version.matches(DESCRIPTION_VERSION) else schemas.CREATE
    body = validation.extract_body(req, schema)["flavor"]
    rxtx_factor = _rxtx_factor(body.get("rxtx_factor"))
    flavorid = body.get("id")
    flavor = db_flavors.flavor_create(
        util.get_state(req).db,
        name=body["name"],
        # Nova stores a number id as its text (nova/compute/flavors.py create()).
        flavorid=None if flavorid is None else str(flavorid),
        vcpus=_int(body, "vcpus", 1),
        memory_mb=_int(body, "ram", 1),
        root_gb=_int(body, "disk", 0),
        ephemeral_gb=_int(body, "OS-FLV-EXT-DATA:ephemeral", 0),
        swap=_int(body, "swap", 0),
        is_public=validation.to_bool(body.get("os-flavor-access:is_public", True)),
        description=body.get("description"),
        rxtx_factor=rxtx_factor,
    )
    return util.json_response({"flavor": format_flavor(req, flavor)})


def _int(body: dict[str, Any], name: str, minimum: int) -> int:
    """A validated integer field (0 when absent), range-checked as Nova does."""
    return validation.to_int(body.get(name, 0), name, minimum, parameter_types.MAX_INT)


def _rxtx_factor(value: float | str | None) -> float:
    """The validated ``rxtx_factor`` as a number (Nova's default 1.0 when absent).

    :raises InvalidInput: unless ``value`` is absent or in ``(0, RXTX_MAX]``, as Nova.
    """
    if value is None:
        return 1.0
    number = float(value)
    if not 0 < number <= schemas.RXTX_MAX:
        raise exception.InvalidInput(
            f"Invalid input for field/attribute rxtx_factor. Value: {value}. "
            f"rxtx_factor must be > 0 and <= {schemas.RXTX_MAX}")
    return number


@microversion.version_handler("2.55")
def update_flavor(req: webob.Request) -> webob.Response:
    """Change a flavor's description (the only thing Nova lets change)."""
    authorize(req, policies.MANAGE_ROOT % "update")
    body = validation.extract_body(req, schemas.UPDATE_V2_55)["flavor"]
    flavor = db_flavors.flavor_update_description(
        util.get_state(req).db, req.urlvars["flavor_id"], body["description"])
    return util.json_response({"flavor": format_flavor(req, flavor)})


def delete_flavor(req: webob.Request) -> webob.Response:
    """Delete a flavor (202, empty body, as Nova); its servers keep their snapshot."""
    authorize(req, policies.MANAGE_ROOT % "delete")
    db_flavors.flavor_delete(util.get_state(req).db, req.urlvars["flavor_id"])
    return util.empty_response(202)

