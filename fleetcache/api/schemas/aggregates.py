"""Request bodies of ``/os-aggregates`` (nova/api/openstack/compute/schemas/aggregates.py)."""

from __future__ import annotations

from typing import Any

from fleetcache.api.schemas.parameter_types import AVAILABILITY_ZONE, END, NAME

#: Metadata keys an aggregate may hold, per request and in all (Nova's ``[quota]
#: metadata_items`` default); the body size limit alone would let 16,000 keys in per request.
MAX_METADATA_ITEMS = 128
HOST: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 255,
    "pattern": r"^[a-zA-Z0-9-._]*" + END,
}
#: A null value deletes the key.
METADATA_WITH_NULL: dict[str, Any] = {
    "type": "object",
    "maxProperties": MAX_METADATA_ITEMS,
    "patternProperties": {
        r"^[a-zA-Z0-9-_:. ]{1,255}" + END: {"type": ["string", "null"], "maxLength": 255},
    },
    "additionalProperties": False,
}


def _wrapped(key: str, inner: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {key: inner},
        "required": [key],
        "additionalProperties": False,
    }


CREATE = _wrapped(
    "aggregate",
    {
        "type": "object",
        "properties": {"name": NAME, "availability_zone": AVAILABILITY_ZONE},
        "required": ["name"],
        "additionalProperties": False,
    },
)

UPDATE = _wrapped(
    "aggregate",
    {
        "type": "object",
        "properties": {"name": NAME, "availability_zone": AVAILABILITY_ZONE},
        "additionalProperties": False,
        "anyOf": [{"required": ["name"]}, {"required": ["availability_zone"]}],
    },
)

_HOST_ACTION: dict[str, Any] = {
    "type": "object",
    "properties": {"host": HOST},
    "required": ["host"],
    "additionalProperties": False,
}

ADD_HOST = _wrapped("add_host", _HOST_ACTION)
REMOVE_HOST = _wrapped("remove_host", _HOST_ACTION)
SET_METADATA = _wrapped(
    "set_metadata",
    {
        "type": "object",
        "properties": {"metadata": METADATA_WITH_NULL},
        "required": ["metadata"],
        "additionalProperties": False,
    },
)

#: ``POST /os-aggregates/{id}/action``: the one key of the body names the action.
ACTIONS = {"add_host": ADD_HOST, "remove_host": REMOVE_HOST, "set_metadata": SET_METADATA}
