"""Instance states, Nova's names: ``vm_state`` (where the instance is), ``task_state`` (what is
being done to it), and the API ``status`` that follows from the two.

fleetcache has no hypervisor: an instance is ``active`` once its root disk exists on its host.
The one table :data:`STATUS` maps states to the API's status, as Nova's
``nova/api/openstack/common.py`` ``_STATE_MAP`` does for the states used here.
"""

from __future__ import annotations

# vm_state
BUILDING = "building"
ACTIVE = "active"
ERROR = "error"
DELETED = "deleted"
#: Stopped by ``os-stop`` (there is no guest to power off: only the state changes).
STOPPED = "stopped"

# task_state
SCHEDULING = "scheduling"
SPAWNING = "spawning"
REBUILDING = "rebuilding"
REBUILD_SPAWNING = "rebuild_spawning"
DELETING = "deleting"

#: ``{vm_state: {task_state or "default": status}}``
STATUS: dict[str, dict[str, str]] = {
    BUILDING: {"default": "BUILD"},
    ACTIVE: {"default": "ACTIVE", REBUILDING: "REBUILD", REBUILD_SPAWNING: "REBUILD"},
    ERROR: {"default": "ERROR", REBUILDING: "REBUILD", REBUILD_SPAWNING: "REBUILD"},
    DELETED: {"default": "DELETED"},
    STOPPED: {"default": "SHUTOFF"},
}


def status_from_state(vm_state: str, task_state: str | None) -> str:
    """The API status of an instance (``UNKNOWN`` for a state this table does not know)."""
    states = STATUS.get(vm_state)
    if states is None:
        return "UNKNOWN"
    return states.get(task_state or "default", states["default"])
