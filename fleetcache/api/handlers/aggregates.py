"""``/os-aggregates``: host aggregates, shaped as Nova's (nova/api/openstack/compute/aggregates.py).

Adding or removing a host asks the conductor (a cast) to mirror the host's aggregates into its
Placement resource provider, as Nova's API does with its report client; the API holds no
Placement credentials. A lost cast leaves drift that ``fleetcache-manage placement
sync-aggregates`` repairs.

Differences from Nova, all friendlier to the clients: a non-integer id is 404 rather than 400
(novaclient gives up on a 400) and ``GET /os-aggregates/{uuid}`` also works (so look-ups by uuid
do). Create answers without ``hosts`` and ``metadata``, exactly as Nova's create does (Tempest's
response schema for it forbids them).
"""

from __future__ import annotations

import logging
from typing import Any

import webob
from oslo_utils import uuidutils

from fleetcache.api import fault, microversion, policy, util, validation
from fleetcache.api.policies import aggregates as policies
from fleetcache.api.schemas import aggregates as schemas
from fleetcache.common import exception, rpc
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db.aggregates import AggregateDict
from fleetcache.common.isolation import ISOLATION_KEY, isolated_properties

UUID_VERSION = microversion.Version(2, 41)

LOG = logging.getLogger(__name__)


def _authorize(req: webob.Request, action: str) -> None:
    state = util.get_state(req)
    policy.authorize(state.enforcer, util.get_context(req), policies.POLICY_ROOT % action)


def format_aggregate(req: webob.Request, aggregate: AggregateDict) -> dict[str, Any]:
    """One aggregate as Nova shows it; ``uuid`` only from microversion 2.41."""
    body: dict[str, Any] = {
        "id": aggregate["id"],
        "name": aggregate["name"],
        "availability_zone": aggregate["availability_zone"],
        "hosts": list(aggregate["hosts"]),
        "metadata": dict(aggregate["metadata"]),
        "created_at": util.format_time(aggregate["created_at"]),
        "updated_at": util.format_time(aggregate["updated_at"]),
        "deleted_at": None,
        "deleted": False,
    }
    if microversion.request_version(req).matches(UUID_VERSION):
        body["uuid"] = aggregate["uuid"]
    return body


def _one(req: webob.Request, aggregate: AggregateDict) -> webob.Response:
    return util.json_response({"aggregate": format_aggregate(req, aggregate)})


def aggregate_id(req: webob.Request) -> int:
    """The integer id in the URL. :raises AggregateNotFound: for anything else (404)."""
    raw = req.urlvars["aggregate_id"]
    number = util.int_id(raw)
    if number is None:
        raise exception.AggregateNotFound(aggregate_id=raw)
    return number


def list_aggregates(req: webob.Request) -> webob.Response:
    """List all aggregates."""
    _authorize(req, "index")
    aggregates = db_aggregates.aggregate_list(util.get_state(req).db)
    return util.json_response({"aggregates": [format_aggregate(req, a) for a in aggregates]})


def create_aggregate(req: webob.Request) -> webob.Response:
    """Create an aggregate, optionally in an availability zone (200, as Nova)."""
    _authorize(req, "create")
    body = validation.extract_body(req, schemas.CREATE)["aggregate"]
    aggregate = db_aggregates.aggregate_create(
        util.get_state(req).db, body["name"], body.get("availability_zone")
    )
    created = format_aggregate(req, aggregate)
    del created["hosts"], created["metadata"]
    return util.json_response({"aggregate": created})


def get_aggregate(req: webob.Request) -> webob.Response:
    """Show an aggregate, by integer id or by uuid."""
    _authorize(req, "show")
    db = util.get_state(req).db
    raw = req.urlvars["aggregate_id"]
    if uuidutils.is_uuid_like(raw):
        return _one(req, db_aggregates.aggregate_get_by_uuid(db, raw))
    return _one(req, db_aggregates.aggregate_get(db, aggregate_id(req)))


def update_aggregate(req: webob.Request) -> webob.Response:
    """Rename an aggregate or change its availability zone."""
    _authorize(req, "update")
    ident = aggregate_id(req)
    body = validation.extract_body(req, schemas.UPDATE)["aggregate"]
    aggregate = db_aggregates.aggregate_update(
        util.get_state(req).db,
        ident,
        name=body.get("name"),
        availability_zone=body.get("availability_zone"),
    )
    return _one(req, aggregate)


def delete_aggregate(req: webob.Request) -> webob.Response:
    """Delete an aggregate without hosts (200, empty body, as Nova)."""
    _authorize(req, "delete")
    try:
        db_aggregates.aggregate_delete(util.get_state(req).db, aggregate_id(req))
    except exception.AggregateNotEmpty as exc:
        # Nova answers 400 (InvalidAggregateAction) here, not 409; keep the stable error code.
        return fault.fault_response(400, exc.message, exc.error_code)
    return util.empty_response(200)


def _action_name(body: Any) -> str:
    if not isinstance(body, dict) or len(body) != 1:
        raise exception.InvalidInput(
            "The action body must hold exactly one of: " + ", ".join(schemas.ACTIONS)
        )
    name = next(iter(body))
    if name not in schemas.ACTIONS:
        raise exception.InvalidInput(f"There is no such action: {name}")
    return str(name)


def post_aggregate_action(req: webob.Request) -> webob.Response:
    """Run ``add_host``, ``remove_host`` or ``set_metadata`` on an aggregate."""
    body = util.read_json(req)
    action = _action_name(body)
    _authorize(req, action)
    ident = aggregate_id(req)
    validation.validate(body, schemas.ACTIONS[action])
    db = util.get_state(req).db
    args = body[action]
    if action == "add_host":
        aggregate = db_aggregates.aggregate_add_host(db, ident, args["host"])
        _mirror_to_placement(req, args["host"])
    elif action == "remove_host":
        aggregate = db_aggregates.aggregate_remove_host(db, ident, args["host"])
        _mirror_to_placement(req, args["host"])
    else:
        _check_isolation(args["metadata"])
        _check_metadata_limit(db_aggregates.aggregate_get(db, ident), args["metadata"])
        aggregate = db_aggregates.aggregate_set_metadata(db, ident, args["metadata"])
    return _one(req, aggregate)


def _check_isolation(changes: dict[str, str | None]) -> None:
    """:raises InvalidInput: an ``image_isolation_property`` that names no image property
    (``" , "``) would make an aggregate that takes no image at all, silently."""
    value = changes.get(ISOLATION_KEY)
    if value is not None and not isolated_properties(value):
        raise exception.InvalidInput(
            reason=f"{ISOLATION_KEY} {value!r} names no image property: give one or more "
            "property names, separated by commas")


def _check_metadata_limit(aggregate: AggregateDict, changes: dict[str, str | None]) -> None:
    """:raises AggregateMetadataLimitExceeded: (403, as Nova's metadata quota) when the
    aggregate would hold more than ``MAX_METADATA_ITEMS`` keys after ``changes``."""
    keys = set(aggregate["metadata"])
    keys |= {key for key, value in changes.items() if value is not None}
    keys -= {key for key, value in changes.items() if value is None}
    if len(keys) > schemas.MAX_METADATA_ITEMS:
        raise exception.AggregateMetadataLimitExceeded(limit=schemas.MAX_METADATA_ITEMS)


_MIRROR_ERRORS: tuple[type[Exception], ...] = (exception.RPCVersionCapped,
                                                *rpc.DELIVERY_ERRORS)


def _mirror_to_placement(req: webob.Request, host: str) -> None:
    """Cast the host's aggregate change to the conductor; the change itself is already
    committed, so a failure here is logged, not returned."""
    try:
        util.get_state(req).conductor_api.sync_host_aggregates(util.get_context(req), host)
    except _MIRROR_ERRORS as exc:
        LOG.warning("Placement aggregates of %s not updated (fleetcache-manage placement "
                    "sync-aggregates repairs them): %s", host, exc)
