"""Flavor access: the projects a private flavor is shared with, as Nova's
(nova/api/openstack/compute/flavor_access.py).

* ``GET /flavors/{id}/os-flavor-access`` lists them (a public flavor has no list: 404);
* ``POST /flavors/{id}/action`` with ``{"addTenantAccess": {"tenant": P}}`` shares the flavor
  with project P (409 when it already is; from 2.7, 409 for a public flavor, which below 2.7
  Nova records all the same) and ``{"removeTenantAccess": {"tenant": P}}`` stops sharing it
  (404 when it was not). Both answer the list as it then is.

Both are admin-only by default. A project to share with must exist in Keystone
(:func:`fleetcache.api.identity.verify_project_id`, 400 otherwise); one to remove need not.
What a shared flavor changes for the project (it lists, shows and boots it) is in
:mod:`.flavors`.
"""

from __future__ import annotations

from typing import Any

import webob
import webob.exc

from fleetcache.api import identity, microversion, util, validation
from fleetcache.api.handlers.flavors import authorize, get_visible
from fleetcache.api.policies import flavor_access as policies
from fleetcache.api.schemas import flavor_access as schemas
from fleetcache.common import exception
from fleetcache.common.db import flavors as db_flavors

PUBLIC_FLAVOR_CONFLICT_VERSION = microversion.Version(2, 7)


def _access_list(flavorid: str, projects: list[str]) -> webob.Response:
    return util.json_response({"flavor_access": [
        {"flavor_id": flavorid, "tenant_id": project} for project in projects]})


def list_flavor_access(req: webob.Request) -> webob.Response:
    """List the projects a private flavor is shared with."""
    authorize(req, policies.LIST)
    flavorid = req.urlvars["flavor_id"]
    flavor = get_visible(req, flavorid)
    if flavor["is_public"]:
        raise webob.exc.HTTPNotFound(
            explanation="Access list not available for public flavors.")
    return _access_list(flavorid, db_flavors.flavor_projects(util.get_state(req).db, flavorid))


def _action_name(body: Any) -> str:
    if not isinstance(body, dict) or len(body) != 1:
        raise exception.InvalidInput(
            "The action body must hold exactly one of: " + ", ".join(schemas.ACTIONS))
    name = next(iter(body))
    if name not in schemas.ACTIONS:
        raise exception.InvalidInput(f"There is no such action: {str(name)[:64]}")
    return str(name)


def post_flavor_action(req: webob.Request) -> webob.Response:
    """Share a private flavor with a project (``addTenantAccess``) or stop sharing it
    (``removeTenantAccess``); answers the flavor's access list."""
    body = util.read_json(req)
    action = _action_name(body)
    authorize(req, policies.ACTION_RULES[action])
    validation.validate(body, schemas.ACTIONS[action])
    project_id = body[action]["tenant"]
    if action == "addTenantAccess":
        return _add(req, project_id)
    return _remove(req, project_id)


def _add(req: webob.Request, project_id: str) -> webob.Response:
    identity.verify_project_id(req, project_id)
    flavorid = req.urlvars["flavor_id"]
    flavor = get_visible(req, flavorid)
    if flavor["is_public"] and microversion.request_version(req).matches(
            PUBLIC_FLAVOR_CONFLICT_VERSION):
        raise webob.exc.HTTPConflict(explanation="Can not add access to a public flavor.")
    projects = db_flavors.flavor_access_add(util.get_state(req).db, flavorid, project_id)
    return _access_list(flavorid, projects)


def _remove(req: webob.Request, project_id: str) -> webob.Response:
    # As Nova: a project Keystone does not know may still be removed from the list.
    identity.verify_project_id(req, project_id, missing_ok=True)
    flavorid = req.urlvars["flavor_id"]
    get_visible(req, flavorid)
    projects = db_flavors.flavor_access_remove(util.get_state(req).db, flavorid, project_id)
    return _access_list(flavorid, projects)
