"""``/servers/{id}/metadata``: a server's metadata, shaped as Nova's
(nova/api/openstack/compute/server_metadata.py).

The project's readers list and show it, its members change it: ``POST`` merges keys in,
``PUT`` replaces it all, ``PUT /{key}`` sets one key (the body names exactly that key),
``DELETE /{key}`` removes one (204). As in Nova a change needs a server ``ACTIVE`` or stopped
with no task running (409 otherwise), and a server holds at most ``metadata_items`` keys
(403 beyond). Another project's server is 404, as every server route.
"""

from __future__ import annotations

import sys

import webob

from fleetcache.api import util, validation
from fleetcache.api.handlers import servers
from fleetcache.api.policies import server_metadata as policies
from fleetcache.api.schemas import server_metadata as schemas
from fleetcache.common import exception, instance_states
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db.instances import InstanceDict

#: The states a server's metadata may change in (Nova's ``update_instance_metadata``: active,
#: paused, suspended or stopped; fleetcache has no pause or suspend).
CHANGEABLE = (instance_states.ACTIVE, instance_states.STOPPED)


def _instance(req: webob.Request, action: str) -> InstanceDict:
    return servers.get_instance(req, policies.ROOT % action)


def _change(req: webob.Request, instance: InstanceDict, metadata: dict[str, str],
            replace: bool = False, deleted: tuple[str, ...] = ()) -> dict[str, str]:
    state = util.get_state(req)
    # The project's ``server_metadata_items`` limit, as create checks it (-1: no limit).
    limit = state.quota.check(instance["project_id"]).metadata_items_limit()
    return db_instances.instance_metadata_update(
        state.db, instance["uuid"], metadata, replace=replace,
        max_items=limit if limit >= 0 else sys.maxsize, expected_vm_state=CHANGEABLE,
        deleted=deleted)


def list_server_metadata(req: webob.Request) -> webob.Response:
    """A server's metadata: ``{"metadata": {key: value}}``."""
    instance = _instance(req, "index")
    return util.json_response({"metadata": instance["metadata"]})


def create_server_metadata(req: webob.Request) -> webob.Response:
    """Add or change the keys given, the others stay (200 with all of them, as Nova)."""
    instance = _instance(req, "create")
    metadata = validation.extract_body(req, schemas.METADATA_BODY)["metadata"]
    return util.json_response({"metadata": _change(req, instance, metadata)})


def replace_server_metadata(req: webob.Request) -> webob.Response:
    """Replace the whole metadata with the one given (200 with it)."""
    instance = _instance(req, "update_all")
    metadata = validation.extract_body(req, schemas.METADATA_BODY)["metadata"]
    return util.json_response({"metadata": _change(req, instance, metadata, replace=True)})


def get_server_metadata_item(req: webob.Request) -> webob.Response:
    """One key: ``{"meta": {key: value}}``; 404 when the server has no such key."""
    instance = _instance(req, "show")
    key = req.urlvars["key"]
    if key not in instance["metadata"]:
        raise exception.InstanceMetadataNotFound()
    return util.json_response({"meta": {key: instance["metadata"][key]}})


def set_server_metadata_item(req: webob.Request) -> webob.Response:
    """Set one key; the body must name exactly the key of the URL (400 otherwise)."""
    instance = _instance(req, "update")
    meta = validation.extract_body(req, schemas.META_BODY)["meta"]
    key = req.urlvars["key"]
    if key not in meta:
        raise exception.InvalidInput("Request body and URI mismatch")
    _change(req, instance, meta)
    return util.json_response({"meta": meta})


def delete_server_metadata_item(req: webob.Request) -> webob.Response:
    """Delete one key (204); 404 when the server has no such key."""
    instance = _instance(req, "delete")
    key = req.urlvars["key"]
    if key not in instance["metadata"]:
        raise exception.InstanceMetadataNotFound()
    _change(req, instance, {}, deleted=(key,))
    return util.empty_response(204)
