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


#: Every status Nova's ``_STATE_MAP`` can give (nova/api/openstack/common.py): a list filtered
#: by one fleetcache never gives is empty, not an invalid filter.
NOVA_STATUSES = frozenset({
    "ACTIVE", "BUILD", "DELETED", "ERROR", "HARD_REBOOT", "MIGRATING", "PASSWORD", "PAUSED",
    "REBOOT", "REBUILD", "RESCUE", "RESIZE", "REVERT_RESIZE", "SHELVED", "SHELVED_OFFLOADED",
    "SHUTOFF", "SOFT_DELETED", "SUSPENDED", "VERIFY_RESIZE",
})


def states_of_statuses(statuses: list[str]) -> tuple[set[str], set[str | None] | None]:
    """The states a status filter selects, as Nova's ``task_and_vm_state_from_status``: the
    ``vm_state`` values of :data:`STATUS` any of ``statuses`` (any case) maps from, and the
    ``task_state`` values, or ``None`` when a ``vm_state``'s default status is among them
    (then any task state will do, as in Nova: ``ACTIVE`` also finds a server rebuilding).
    """
    wanted = {status.upper() for status in statuses}
    vm_states: set[str] = set()
    task_states: set[str | None] = set()
    any_task = False
    for vm_state, by_task in STATUS.items():
        for task_state, status in by_task.items():
            if status in wanted:
                vm_states.add(vm_state)
                if task_state == "default":
                    any_task = True
                else:
                    task_states.add(task_state)
    return vm_states, None if any_task else task_states


def status_from_state(vm_state: str, task_state: str | None) -> str:
    """The API status of an instance (``UNKNOWN`` for a state this table does not know)."""
    states = STATUS.get(vm_state)
    if states is None:
        return "UNKNOWN"
    return states.get(task_state or "default", states["default"])
