"""Request bodies of ``/flavors`` and ``/flavors/{id}/os-extra_specs``
(nova/api/openstack/compute/schemas/flavor_manage.py and flavors_extraspecs.py).

Numbers are JSON integers (Nova also takes digit strings; the clients send integers).
"""

from __future__ import annotations

from typing import Any

from fleetcache.api.schemas.parameter_types import END, NAME

#: The largest value of an integer column (Nova's ``db.MAX_INT``).
MAX_INT = 0x7FFFFFFF
#: Nova's flavor id: letters, digits, ``.``, ``_``, ``-`` and inner spaces.
FLAVOR_ID: dict[str, Any] = {
    "type": ["string", "null"],
    "minLength": 1,
    "maxLength": 255,
    "pattern": r"^(?! )[a-zA-Z0-9. _-]+(?<! )" + END,
    "description": "letters, digits, '.', '_', '-' and spaces, not at either end",
}
#: The text of a flavor description (Nova's ``description`` parameter type, 65535 chars).
DESCRIPTION: dict[str, Any] = {"type": ["string", "null"], "maxLength": 65535}
_POSITIVE = {"type": "integer", "minimum": 1, "maximum": MAX_INT}
_NON_NEGATIVE = {"type": "integer", "minimum": 0, "maximum": MAX_INT}
#: An extra spec key (Nova's ``flavors_extraspecs.py``).
SPEC_KEY = r"^[a-zA-Z0-9-_:. ]{1,255}" + END
SPEC_VALUE: dict[str, Any] = {"type": "string", "maxLength": 255}

_FLAVOR_PROPERTIES: dict[str, Any] = {
    "name": NAME,
    "id": FLAVOR_ID,
    "ram": _POSITIVE,
    "vcpus": _POSITIVE,
    "disk": _NON_NEGATIVE,
    "OS-FLV-EXT-DATA:ephemeral": _NON_NEGATIVE,
    "swap": _NON_NEGATIVE,
    "rxtx_factor": {"type": "number", "minimum": 1.0, "maximum": 1.0,
                    "description": "Accepted for compatibility; only 1.0 (no networking)"},
    "os-flavor-access:is_public": {"type": "boolean"},
}


def _create(description: bool) -> dict[str, Any]:
    properties = dict(_FLAVOR_PROPERTIES)
    if description:
        properties["description"] = DESCRIPTION
    return {
        "type": "object",
        "properties": {"flavor": {
            "type": "object",
            "properties": properties,
            "required": ["name", "ram", "vcpus", "disk"],
            "additionalProperties": False,
        }},
        "required": ["flavor"],
        "additionalProperties": False,
    }


CREATE = _create(description=False)
#: From microversion 2.55 a flavor has a description.
CREATE_V2_55 = _create(description=True)

#: ``PUT /flavors/{id}`` (2.55): only the description changes.
UPDATE_V2_55: dict[str, Any] = {
    "type": "object",
    "properties": {"flavor": {
        "type": "object",
        "properties": {"description": DESCRIPTION},
        "required": ["description"],
        "additionalProperties": False,
    }},
    "required": ["flavor"],
    "additionalProperties": False,
}

#: ``POST /flavors/{id}/os-extra_specs``: create or replace several.
EXTRA_SPECS_CREATE: dict[str, Any] = {
    "type": "object",
    "properties": {"extra_specs": {
        "type": "object",
        "minProperties": 1,
        "maxProperties": 128,
        "patternProperties": {SPEC_KEY: SPEC_VALUE},
        "additionalProperties": False,
    }},
    "required": ["extra_specs"],
    "additionalProperties": False,
}

#: ``PUT /flavors/{id}/os-extra_specs/{key}``: exactly the key of the URL.
EXTRA_SPEC_UPDATE: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "maxProperties": 1,
    "patternProperties": {SPEC_KEY: SPEC_VALUE},
    "additionalProperties": False,
}
