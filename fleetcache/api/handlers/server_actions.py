"""``POST /servers/{id}/action``: server actions (Nova's body names the action); fleetcache has
``rebuild``, ``os-stop`` and ``os-start``.

Rebuild replaces the server's root disk with one made from a new image on the same host. The
conductor asks the scheduler again whether that host may take the new image (its image-type
trait, the isolation filters), as Nova does for a rebuild with a new image, so an image the
host cannot use ends in ``ERROR`` with the no-valid-host fault instead of a disk the host
cannot boot.

Stop and start change the server's state only (there is no guest to power off or on): ``os-stop``
takes an ``ACTIVE`` or ``ERROR`` server to ``stopped`` (status ``SHUTOFF``), ``os-start`` a
stopped one back to ``ACTIVE``; both answer 202 with no body, and 409 from another state or
while a task runs, as Nova. A stopped server keeps its host, disk and Placement allocation, as
in Nova.
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
#: Each action's policy (``os_compute_api:servers:<rule>``, Nova's names).
RULES = {"rebuild": "rebuild", "os-stop": "stop", "os-start": "start"}
#: action -> (the states it starts from, the state it leaves), as Nova's
#: ``check_instance_state`` on ``stop`` and ``start``.
POWER_ACTIONS = {
    "os-stop": ((instance_states.ACTIVE, instance_states.ERROR), instance_states.STOPPED),
    "os-start": ((instance_states.STOPPED,), instance_states.ACTIVE),
}


def _action_name(body: Any) -> str:
    if not isinstance(body, dict) or len(body) != 1:
        raise exception.InvalidInput(
            reason="The action body must hold exactly one of: " + ", ".join(schemas.ACTIONS))
    name = next(iter(body))
    if name not in schemas.ACTIONS:
        raise exception.InvalidInput(reason=f"There is no such action: {name}")
    return str(name)


def post_server_action(req: webob.Request) -> webob.Response:
    """Run a server action: ``rebuild`` (202 with the server, as Nova), ``os-stop`` or
    ``os-start`` (202, empty)."""
    body = util.read_json(req)
    action = _action_name(body)
    instance = servers.get_instance(req, RULES[action])
    validation.validate(body, schemas.ACTIONS[action])
    if action in POWER_ACTIONS:
        return _set_power(req, instance, action)
    return _rebuild(req, instance, body["rebuild"])


def _set_power(req: webob.Request, instance: InstanceDict, action: str) -> webob.Response:
    """Stop or start a server: its state only (202, empty body, as Nova).

    :raises InstanceInvalidState: (409) from another state, or while a task runs.
    """
    sources, target = POWER_ACTIONS[action]
    db_instances.instance_update(
        util.get_state(req).db, instance["uuid"], {"vm_state": target},
        expected_vm_state=sources, expected_task_state=[None])
    return util.empty_response(202)


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
    return util.json_response({"server": server_views.format_changed(req, updated)}, status=202)
