"""``/flavors/{id}/os-extra_specs``: a flavor's extra specs, shaped as Nova's
(nova/api/openstack/compute/flavors_extraspecs.py).

Extra specs steer scheduling (``aggregate_instance_extra_specs:*``, ``trait:*``); the
scheduler reads the snapshot a server took at create time, so changing them later moves no
server. Keys and values are strings (Nova also takes numbers and booleans in the body).
"""

from __future__ import annotations

import webob

from fleetcache.api import util, validation
from fleetcache.api.handlers.flavors import authorize, get_visible
from fleetcache.api.policies import flavors as policies
from fleetcache.api.schemas import flavors as schemas
from fleetcache.common import exception
from fleetcache.common.db import flavors as db_flavors


def list_flavor_extra_specs(req: webob.Request) -> webob.Response:
    """List a flavor's extra specs."""
    authorize(req, policies.SPECS_ROOT % "index")
    flavor = get_visible(req, req.urlvars["flavor_id"])
    return util.json_response({"extra_specs": dict(flavor["extra_specs"])})


def create_flavor_extra_specs(req: webob.Request) -> webob.Response:
    """Create or replace extra specs (the others stay); returns the ones given."""
    authorize(req, policies.SPECS_ROOT % "create")
    specs = validation.extract_body(req, schemas.EXTRA_SPECS_CREATE)["extra_specs"]
    db_flavors.extra_specs_update(util.get_state(req).db, req.urlvars["flavor_id"], specs)
    return util.json_response({"extra_specs": specs})


def get_flavor_extra_spec(req: webob.Request) -> webob.Response:
    """Show one extra spec as ``{key: value}``."""
    authorize(req, policies.SPECS_ROOT % "show")
    flavorid, key = req.urlvars["flavor_id"], req.urlvars["flavor_extra_spec_key"]
    specs = get_visible(req, flavorid)["extra_specs"]
    if key not in specs:
        raise exception.FlavorExtraSpecNotFound(flavor_id=flavorid, key=key)
    return util.json_response({key: specs[key]})


def update_flavor_extra_spec(req: webob.Request) -> webob.Response:
    """Set one extra spec; the body names exactly the key of the URL."""
    authorize(req, policies.SPECS_ROOT % "update")
    key = req.urlvars["flavor_extra_spec_key"]
    body = validation.extract_body(req, schemas.EXTRA_SPEC_UPDATE)
    if key not in body:
        raise exception.InvalidInput(reason="Request body and URI mismatch")
    db_flavors.extra_specs_update(util.get_state(req).db, req.urlvars["flavor_id"],
                                  {key: body[key]})
    return util.json_response({key: body[key]})


def delete_flavor_extra_spec(req: webob.Request) -> webob.Response:
    """Delete one extra spec (200, empty body, as Nova)."""
    authorize(req, policies.SPECS_ROOT % "delete")
    db_flavors.extra_spec_delete(util.get_state(req).db, req.urlvars["flavor_id"],
                                 req.urlvars["flavor_extra_spec_key"])
    return util.empty_response(200)
