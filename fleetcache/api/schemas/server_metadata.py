"""Request bodies of ``/servers/{id}/metadata``, as Nova's (its schemas/server_metadata.py):
a server's metadata whole, or one key of it."""

from __future__ import annotations

import copy
from typing import Any

from fleetcache.api.schemas.servers import METADATA

#: ``POST`` (merge) and ``PUT`` (replace) ``/servers/{id}/metadata``.
METADATA_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {"metadata": METADATA},
    "required": ["metadata"],
    "additionalProperties": False,
}

_ONE_ITEM = copy.deepcopy(METADATA)
_ONE_ITEM.update({"minProperties": 1, "maxProperties": 1})

#: ``PUT /servers/{id}/metadata/{key}``: exactly that one key.
META_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {"meta": _ONE_ITEM},
    "required": ["meta"],
    "additionalProperties": False,
}
