"""Request body of ``POST /os-aggregates/{id}/images`` (Nova's ``aggregate_images_v2_81``)."""

from __future__ import annotations

from typing import Any

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
    },
    "required": ["cache"],
    "additionalProperties": False,
}
