"""Request bodies of ``/flavors`` and ``/flavors/{id}/os-extra_specs``
(nova/api/openstack/compute/schemas/flavor_manage.py and flavors_extraspecs.py).

As Nova's: a number may be a JSON integer or a string of digits, ``is_public`` a boolean or
one of its strings (:data:`~fleetcache.api.schemas.parameter_types.BOOLEAN`), the id a string
or a number. The handler converts them after validation.
"""

from __future__ import annotations

from typing import Any

from fleetcache.api.schemas.parameter_types import BOOLEAN, END, NAME, integer

#: Nova's flavor id: letters, digits, ``.``, ``_``, ``-`` and inner spaces, or a number
#: (the pattern and lengths apply to strings only; a number is stored as its text).
FLAVOR_ID: dict[str, Any] = {
    "type": ["string", "number", "null"],
    "minLength": 1,
    "maxLength": 255,
    "pattern": r"^(?! )[a-zA-Z0-9. _-]+(?<! )" + END,
    "description": "letters, digits, '.', '_', '-' and spaces, not at either end",
}
#: The text of a flavor description (Nova's ``description`` parameter type, 65535 chars).
DESCRIPTION: dict[str, Any] = {"type": ["string", "null"], "maxLength": 65535}
_POSITIVE = integer(1)
_NON_NEGATIVE = integer(0)
#: Nova's SQL_SP_FLOAT_MAX: the largest ``rxtx_factor``.
RXTX_MAX = 3.40282e38
#: Nova's rxtx_factor: a positive number, or its decimal text; > 0 is checked by the handler
#: (draft 4's boolean ``exclusiveMinimum`` is not OpenAPI 3.1's).
RXTX_FACTOR: dict[str, Any] = {
    "type": ["number", "string"],
    "pattern": r"^[0-9]{1,40}(\.[0-9]{1,40})?" + END,
    "minimum": 0,
    "maximum": RXTX_MAX,
    "description": "Nova's network bandwidth factor, kept and shown (1.0 when not given)",
}
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
    "rxtx_factor": RXTX_FACTOR,
    "os-flavor-access:is_public": BOOLEAN,
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
