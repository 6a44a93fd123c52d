"""Request bodies of ``/servers`` and its actions (nova/api/openstack/compute/schemas/servers.py),
for the subset fleetcache builds: an image, a flavor, a zone (or the admin's ``zone:host``),
a count, and no network. What Nova's clients also say of a server (``description`` from 2.19,
``metadata``, ``accessIPv4``/``accessIPv6``, ``OS-DCF:diskConfig``, ``adminPass``) is validated
as Nova does; see the handler for what becomes of it.
"""

from __future__ import annotations

import copy
from typing import Any

from fleetcache.api.schemas.parameter_types import END, NAME, printable_pattern

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
#: that sends its default works), or the pseudo-network "none" that ``--network none`` names
#: (``[{"uuid": "none"}]``, see api/handlers/networks.py).
NETWORKS: dict[str, Any] = {"anyOf": [
    {"enum": ["none", "auto"]},
    {"type": "array", "minItems": 1, "maxItems": 1, "items": {
        "type": "object", "properties": {"uuid": {"enum": ["none"]}},
        "required": ["uuid"], "additionalProperties": False}},
]}

#: The one block device mapping fleetcache builds: the image as a local root disk. The
#: openstack client sends it with every ``--image`` boot (python-openstackclient 10.5.0:
#: ``{"uuid": <image>, "boot_index": 0, "source_type": "image", "destination_type": "local",
#: "delete_on_termination": true}``); volumes are refused (there is no block storage).
BLOCK_DEVICE_MAPPING: dict[str, Any] = {
    "type": "array",
    "maxItems": 1,
    "items": {
        "type": "object",
        "properties": {
            "uuid": REF,
            "boot_index": {"type": ["integer", "string"], "enum": [0, "0"]},
            "source_type": {"enum": ["image"]},
            "destination_type": {"enum": ["local"]},
            "delete_on_termination": {"type": "boolean"},
        },
        "required": ["uuid", "source_type"],
        "additionalProperties": False,
    },
    "description": "Only the image as the local root disk (what openstack sends for --image)",
}

#: Nova's ``metadata``: at most 255-character keys of ``[a-zA-Z0-9-_:. ]`` and string values.
METADATA: dict[str, Any] = {
    "type": "object",
    "patternProperties": {
        r"^[a-zA-Z0-9-_:. ]{1,255}" + END: {"type": "string", "maxLength": 255},
    },
    "additionalProperties": False,
}
#: Nova's ``accessIPv4`` and ``accessIPv6``; an IPv6 address with a zone (``fe80::1%eth0``)
#: is refused, as Nova's (netaddr) refuses it.
ACCESS_IPV4: dict[str, Any] = {"type": "string", "format": "ipv4"}
ACCESS_IPV6: dict[str, Any] = {"type": "string", "format": "ipv6",
                               "pattern": "^[0-9A-Fa-f:.]+" + END,
                               "description": "an IPv6 address (without a zone)"}
#: Nova's server ``description`` (2.19): up to 255 printable characters, or null (none).
DESCRIPTION: dict[str, Any] = {"type": ["string", "null"], "minLength": 0, "maxLength": 255,
                               "pattern": printable_pattern(),
                               "description": "printable characters"}
#: Nova's ``admin_password``: any string (never stored).
ADMIN_PASSWORD: dict[str, Any] = {"type": "string"}
DISK_CONFIG: dict[str, Any] = {"enum": ["AUTO", "MANUAL"]}

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
        "block_device_mapping_v2": BLOCK_DEVICE_MAPPING,
        "metadata": METADATA,
        "accessIPv4": ACCESS_IPV4,
        "accessIPv6": ACCESS_IPV6,
        "adminPass": ADMIN_PASSWORD,
        "OS-DCF:diskConfig": DISK_CONFIG,
    },
    "required": ["name", "imageRef", "flavorRef"],
    "additionalProperties": False,
}


def _create(networks_required: bool, description: bool = True) -> dict[str, Any]:
    server = copy.deepcopy(_SERVER)
    if networks_required:
        server["required"] = [*server["required"], "networks"]
    if description:
        server["properties"]["description"] = DESCRIPTION
    return {
        "type": "object",
        "properties": {"server": server},
        "required": ["server"],
        "additionalProperties": False,
    }


CREATE = _create(networks_required=False, description=False)
#: From microversion 2.19 a server has a ``description`` (Nova).
CREATE_V2_19 = _create(networks_required=False)
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

#: ``os-stop`` and ``os-start``: Nova reads nothing but the key (clients send ``null``).
STOP: dict[str, Any] = {"type": "object", "required": ["os-stop"]}
START: dict[str, Any] = {"type": "object", "required": ["os-start"]}

#: ``POST /servers/{id}/action``: the one key of the body names the action.
ACTIONS = {"rebuild": REBUILD, "os-stop": STOP, "os-start": START}

def _update(description: bool) -> dict[str, Any]:
    properties = {"name": NAME, "accessIPv4": ACCESS_IPV4, "accessIPv6": ACCESS_IPV6,
                  "OS-DCF:diskConfig": DISK_CONFIG}
    if description:
        properties["description"] = DESCRIPTION
    return {
        "type": "object",
        "properties": {"server": {
            "type": "object", "properties": properties, "additionalProperties": False,
        }},
        "required": ["server"],
        "additionalProperties": False,
    }


#: ``PUT /servers/{id}`` (Nova's ``update``): the name, access addresses and disk config...
UPDATE = _update(description=False)
#: ... and from 2.19 the description (null removes it).
UPDATE_V2_19 = _update(description=True)
