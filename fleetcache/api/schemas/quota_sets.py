"""Request schemas of ``/os-quota-sets`` and ``GET /limits``: Nova's
(nova/api/openstack/compute/schemas/quota_sets.py and limits.py), the body of ``PUT`` and the
query parameters of each route.

A query is checked as ``{name: [value, ...]}`` (every parameter may repeat). Up to 2.74 an
unknown query parameter is ignored; from 2.75 it is a 400, as in Nova.
"""

from __future__ import annotations

import copy
from typing import Any

from fleetcache.api.schemas.parameter_types import BOOLEAN, END, MAX_INT

#: A quota value: an integer or a string of one, -1 meaning unlimited.
QUOTA: dict[str, Any] = {
    "type": ["integer", "string"],
    "pattern": "^-?[0-9]+" + END,
    "minimum": -1,
    "maximum": MAX_INT,
}
_RESOURCES = ("instances", "cores", "ram", "floating_ips", "fixed_ips", "metadata_items",
              "key_pairs", "security_groups", "security_group_rules", "injected_files",
              "injected_file_content_bytes", "injected_file_path_bytes", "server_groups",
              "server_group_members")
#: Removed from the quota sets at 2.36 (nova-network's) and at 2.57 (file injection's).
REMOVED_AT_2_36 = ("fixed_ips", "floating_ips", "security_group_rules", "security_groups")
REMOVED_AT_2_57 = ("injected_files", "injected_file_content_bytes", "injected_file_path_bytes")


def _update(removed: tuple[str, ...]) -> dict[str, Any]:
    properties: dict[str, Any] = {name: QUOTA for name in _RESOURCES if name not in removed}
    properties["force"] = BOOLEAN
    return {
        "type": "object",
        "properties": {"quota_set": {"type": "object", "properties": properties,
                                     "additionalProperties": False}},
        "required": ["quota_set"],
        "additionalProperties": False,
    }


UPDATE = _update(())
UPDATE_V2_36 = _update(REMOVED_AT_2_36)
UPDATE_V2_57 = _update(REMOVED_AT_2_36 + REMOVED_AT_2_57)

_STRINGS = {"type": "array", "items": {"type": "string"}}
#: ``?user_id=`` of show, detail, update and delete (accepted, and answered as the project's:
#: unified limits have no per-user quotas).
QUOTA_SET_QUERY: dict[str, Any] = {
    "type": "object", "properties": {"user_id": _STRINGS}, "additionalProperties": True}
QUOTA_SET_QUERY_V2_75 = {**copy.deepcopy(QUOTA_SET_QUERY), "additionalProperties": False}
#: ``?tenant_id=`` of ``GET /limits``: another project's limits (admins).
LIMITS_QUERY: dict[str, Any] = {
    "type": "object", "properties": {"tenant_id": _STRINGS}, "additionalProperties": True}
LIMITS_QUERY_V2_75 = {**copy.deepcopy(LIMITS_QUERY), "additionalProperties": False}
