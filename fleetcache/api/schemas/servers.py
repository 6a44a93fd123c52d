"""Request bodies of ``/servers`` and its actions (nova/api/openstack/compute/schemas/servers.py),
for the subset fleetcache builds: an image, a flavor, a zone (or the admin's ``zone:host``),
a count, and no network.
"""

from __future__ import annotations

import copy
from typing import Any

from fleetcache.api.schemas.parameter_types import END, NAME

#: An image or flavor reference: its id, or a URL whose last segment is the id.
REF: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 255}
FLAVOR_REF: dict[str, Any] = {"type": ["string", "integer"], "minLength": 1,
                              "maxLength": 255, "minimum": 0}
COUNT: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": 1000}
#: ``zone``, ``zone:host``, ``zone:host:node`` or ``:host`` (the host forms: admins only).
AVAILABILITY_ZONE: dict[str, Any] = {
    "type": "string", "minLength": 1, "maxLength": 255,
    "pattern": r"^[^\u0000-\u001f\u007f]*" + END,
    "description": "a zone, or zone:host (admins), without control characters",
}
#: fleetcache attaches no network: "none", or "auto" (taken as none, so that a client
#: that sends its default works).
NETWORKS: dict[str, Any] = {"enum": ["none", "auto"]}

_SERVER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": NAME,
        "imageRef": REF,
        "flavorRef": FLAVOR_REF,
        "availability_zone": AVAILABILITY_ZONE,
        "min_count": COUNT,
        "max_count": COUNT,
        "return_reservation_id": {"type": "boolean"},
        "networks": {**NETWORKS, "description": "Optional below 2.37, required from 2.37"},
    },
    "required": ["name", "imageRef", "flavorRef"],
    "additionalProperties": False,
}


def _create(networks_required: bool) -> dict[str, Any]:
    server = copy.deepcopy(_SERVER)
    if networks_required:
        server["required"] = [*server["required"], "networks"]
    return {
        "type": "object",
        "properties": {"server": server},
        "required": ["server"],
        "additionalProperties": False,
    }


CREATE = _create(networks_required=False)
#: From microversion 2.37 ``networks`` is required (Nova).
CREATE_V2_37 = _create(networks_required=True)

REBUILD: dict[str, Any] = {
    "type": "object",
    "properties": {"rebuild": {
        "type": "object",
        "properties": {"imageRef": REF},
        "required": ["imageRef"],
        "additionalProperties": False,
    }},
    "required": ["rebuild"],
    "additionalProperties": False,
}

#: ``POST /servers/{id}/action``: the one key of the body names the action.
ACTIONS = {"rebuild": REBUILD}
