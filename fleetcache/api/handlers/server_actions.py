"""``POST /servers/{id}/action``: server actions (Nova's body names the action); fleetcache has
``rebuild``.

Rebuild replaces the server's root disk with one made from a new image on the same host. The
conductor asks the scheduler again whether that host may take the new image (its image-type
trait, the isolation filters), as Nova does for a rebuild with a new image, so an image the
host cannot use ends in ``ERROR`` with the no-valid-host fault instead of a disk the host
cannot boot.
"""

from __future__ import annotations

from typing import Any

import webob

from fleetcache.api import util, validation
from fleetcache.api.handlers import server_views, servers
from fleetcache.api.schemas import servers as schemas
from fleetcache.common import exception, instance_states
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db.instances import InstanceDict

#: States a server may be rebuilt from (Nova: ACTIVE, STOPPED, ERROR).
REBUILDABLE = (instance_states.ACTIVE, instance_states.ERROR)


def _action_name(body: Any) -> str:
    if not isinstance(body, dict) or len(body) != 1:
        raise exception.InvalidInput(
            reason="The action body must hold exactly one of: " + ", ".join(schemas.ACTIONS))
    name = next(iter(body))
    if name not in schemas.ACTIONS:
        raise exception.InvalidInput(reason=f"There is no such action: {name}")
    return str(name)


def post_server_action(req: webob.Request) -> webob.Response:
    """Run a server action: ``rebuild`` (202 with the server, as Nova)."""
    body = util.read_json(req)
    action = _action_name(body)
    instance = servers.get_instance(req, action)
    validation.validate(body, schemas.ACTIONS[action])
    return _rebuild(req, instance, body["rebuild"])


def _rebuild(req: webob.Request, instance: InstanceDict, args: dict[str, Any]) -> webob.Response:
    """Mark the server ``rebuilding`` with its new image and cast the rebuild.

    :raises InstanceInvalidState: (409) while another task runs, or from a state other than
        ACTIVE or ERROR.
    """
    image = servers.lookup_image(req, args["imageRef"])
    flavor = instance["flavor"]
    servers.check_fits(int(flavor.get("root_gb") or 0), image,
                       int(flavor.get("memory_mb") or 0))
    uuid = instance["uuid"]
    updated = db_instances.instance_update(
        util.get_state(req).db, uuid,
        {"task_state": instance_states.REBUILDING, "image_ref": image.id,
         "fault_message": None, "fault_code": None, "fault_details": None,
         "fault_created_at": None},
        expected_vm_state=REBUILDABLE, expected_task_state=[None])
    ctxt = util.get_context(req)
    servers.cast_or_fail(req, [uuid], "rebuild", lambda api: api.rebuild_instance(ctxt, uuid))
    return util.json_response({"server": server_views.format_server(req, updated)}, status=202)
