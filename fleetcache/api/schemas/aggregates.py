"""Request bodies of ``/os-aggregates`` (nova/api/openstack/compute/schemas/aggregates.py)."""

from __future__ import annotations

from typing import Any

#: 1-255 characters, no leading or trailing whitespace (Nova's ``name`` format).
NAME: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 255,
    "pattern": r"^\S(.*\S)?$",
}
AVAILABILITY_ZONE: dict[str, Any] = {
    "type": ["string", "null"],
    "minLength": 1,
    "maxLength": 255,
    "pattern": r"^[^:]*$",
}
HOST: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 255,
    "pattern": r"^[a-zA-Z0-9-._]*$",
}
#: A null value deletes the key.
METADATA_WITH_NULL: dict[str, Any] = {
    "type": "object",
    "patternProperties": {
        r"^[a-zA-Z0-9-_:. ]{1,255}$": {"type": ["string", "null"], "maxLength": 255},
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
