"""Request body of ``POST /os-aggregates/{id}/images`` (Nova's ``aggregate_images_v2_81``),
with fleetcache's one extension key, :data:`PIN_KEY`."""

from __future__ import annotations

from typing import Any

#: Extension key (fleetcache's, optional): pin the images on the aggregate's hosts for this
#: many seconds; the computes' ageing pass keeps them until then (docs/api.md).
PIN_KEY = "fleetcache:pin_seconds"
#: At most a year: a longer pin is a permanent one, which is not what a TTL is for.
MAX_PIN_SECONDS = 366 * 24 * 3600

CACHE_V2_81: dict[str, Any] = {
    "type": "object",
    "properties": {
        "cache": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {"id": {"type": "string", "format": "uuid"}},
                "required": ["id"],
                "additionalProperties": False,
            },
        },
        PIN_KEY: {"type": "integer", "minimum": 1, "maximum": MAX_PIN_SECONDS},
    },
    "required": ["cache"],
    "additionalProperties": False,
}
