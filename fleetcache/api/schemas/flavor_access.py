"""Request bodies of ``POST /flavors/{id}/action``: ``addTenantAccess`` and
``removeTenantAccess`` (nova/api/openstack/compute/schemas/flavor_access.py)."""

from __future__ import annotations

from typing import Any


def _tenant_action(action: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            action: {
                "type": "object",
                # a project id, as the flavor_projects table keeps it
                "properties": {"tenant": {"type": "string", "minLength": 1, "maxLength": 255}},
                "required": ["tenant"],
                "additionalProperties": False,
            },
        },
        "required": [action],
        "additionalProperties": False,
    }


ADD_TENANT_ACCESS = _tenant_action("addTenantAccess")
REMOVE_TENANT_ACCESS = _tenant_action("removeTenantAccess")
#: ``POST /flavors/{id}/action``: the one key of the body names the action.
ACTIONS = {"addTenantAccess": ADD_TENANT_ACCESS, "removeTenantAccess": REMOVE_TENANT_ACCESS}
