"""Request body of ``POST /os-aggregates/{id}/images`` (Nova's ``aggregate_images_v2_81``),
with fleetcache's extension keys: :data:`PIN_KEY` (fleetcache 1.0) and a job's terms
(:data:`TERMS_KEYS`, fleetcache 1.1: ``OpenStack-API-Version: fleetcache 1.1``).

The schema checks each term's type and range; :func:`fleetcache.common.job_terms.check_terms`
then checks what a schema cannot (times that parse, a time zone that exists, the operator's
caps).
"""

from __future__ import annotations

import copy
from typing import Any

from fleetcache.common import job_terms

#: Extension key (fleetcache's, optional): pin the images on the aggregate's hosts for this
#: many seconds; the computes' ageing pass keeps them until then (docs/api.md).
PIN_KEY = "fleetcache:pin_seconds"
#: At most a year: a longer pin is a permanent one, which is not what a TTL is for.
MAX_PIN_SECONDS = 366 * 24 * 3600
#: How a term's key is spelled in the body: ``fleetcache:<key of JobTerms>``.
TERM_PREFIX = "fleetcache:"
#: The body keys of a job's terms, in job_terms.KEYS's order.
TERMS_KEYS = tuple(TERM_PREFIX + key for key in job_terms.KEYS)
#: Most a count may be (Nova's parameter_types.integer bound).
MAX_COUNT = 2**31 - 1
#: Most a rate may be: the largest integer a JSON number holds exactly.
MAX_BYTES_PER_SECOND = 2**53 - 1
#: Longest instant: ``2026-11-29T01:00:00.000000+01:00`` is 32 characters.
MAX_INSTANT_LENGTH = 40
#: IANA names are at most 30 characters today (``America/Argentina/ComodRivadavia``: 32).
MAX_TIMEZONE_LENGTH = 64

_INSTANT = {"type": "string", "minLength": 1, "maxLength": MAX_INSTANT_LENGTH,
            "description": "an ISO 8601 time with its offset, e.g. 2026-11-29T01:00:00Z"}
_CLOCK = {"type": "string", "minLength": 1, "maxLength": 8,
          "description": "a wall-clock time, HH:MM or HH:MM:SS (24 h)"}


def _count(description: str) -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": MAX_COUNT, "description": description}


def _rate(description: str) -> dict[str, Any]:
    return {"type": "integer", "minimum": job_terms.MIN_BYTES_PER_SECOND,
            "maximum": MAX_BYTES_PER_SECOND, "description": description}


#: The schema of each term, by body key.
TERMS_PROPERTIES: dict[str, dict[str, Any]] = {
    "fleetcache:not_before": {**_INSTANT, "description": "start no download before this time "
                              "(an ISO 8601 time with its offset)"},
    "fleetcache:window": {
        "type": "object",
        "description": "a daily window: downloads start only between start and end, "
        "wall-clock time in timezone (end before start spans midnight)",
        "properties": {
            "start": _CLOCK,
            "end": _CLOCK,
            "timezone": {
                "type": "string", "minLength": 1, "maxLength": MAX_TIMEZONE_LENGTH,
                "pattern": "^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$(?!\\n)",
                "description": "an IANA time zone name such as Europe/Paris or UTC",
            },
        },
        "required": ["start", "end", "timezone"],
        "additionalProperties": False,
    },
    "fleetcache:deadline": {**_INSTANT, "description": "stop the job at this time (an ISO "
                            "8601 time with its offset); what is not cached by then is not"},
    "fleetcache:parallelism": _count("hosts called at once, at most [image_cache] "
                                     "precache_concurrency"),
    "fleetcache:origin_downloads": _count("downloads from the image service at once for this "
                                          "job, at most [image_cache] max_concurrent_downloads"),
    "fleetcache:host_bytes_per_second": _rate("each host's download rate, at most "
                                              "[image_cache] max_download_bytes_per_second"),
    "fleetcache:job_bytes_per_second": _rate("the job's download rate over all its hosts"),
    "fleetcache:priority": {"type": "integer", "minimum": job_terms.MIN_PRIORITY,
                            "maximum": job_terms.MAX_PRIORITY,
                            "description": "higher goes first among jobs waiting for the "
                            f"same slots (default {job_terms.DEFAULT_PRIORITY})"},
}
assert tuple(TERMS_PROPERTIES) == TERMS_KEYS, "one schema per key of job_terms.KEYS"

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

#: At fleetcache 1.1: the same with the terms.
CACHE_FLEETCACHE_1_1: dict[str, Any] = copy.deepcopy(CACHE_V2_81)
CACHE_FLEETCACHE_1_1["properties"].update(copy.deepcopy(TERMS_PROPERTIES))
