"""The OpenAPI 3.1 document, generated from a route table and the request schemas.

Every route of the table given (``routes.ROUTE_DECLARATIONS`` when served) appears, with its
handler's docstring as summary, the JSON Schema its body is validated with, and the microversion
it needs. Paths come from ``paths.py``, not from the route table, which imports this module
through the document's handler.
"""

from __future__ import annotations

import re
from typing import Any

from fleetcache.api import microversion
from fleetcache.api.paths import AGGREGATE, OPENAPI, PREFIX, PUBLIC_PATHS
from fleetcache.api.router import Handler, RouteTable
from fleetcache.api.schemas import aggregate_images as image_schemas
from fleetcache.api.schemas import aggregates as aggregate_schemas

AGG = AGGREGATE
REQUEST_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", PREFIX + "/os-aggregates"): aggregate_schemas.CREATE,
    ("PUT", AGG): aggregate_schemas.UPDATE,
    ("POST", AGG + "/action"): {"oneOf": list(aggregate_schemas.ACTIONS.values())},
    ("POST", AGG + "/images"): image_schemas.CACHE_V2_81,
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _wrapped(key: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {key: schema}, "required": [key]}


_AGGREGATE_BODY = _json(_wrapped("aggregate", _ref("Aggregate")), "The aggregate")
SUCCESS: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    ("GET", "/"): ("200", _json(_ref("Versions"), "The API versions")),
    ("GET", PREFIX): ("200", _json(_wrapped("version", _ref("Version")), "v2.1")),
    ("GET", OPENAPI): ("200", {"description": "This document"}),
    ("GET", PREFIX + "/os-aggregates"): (
        "200", _json(_wrapped("aggregates", {"type": "array", "items": _ref("Aggregate")}), "All"),
    ),
    ("POST", PREFIX + "/os-aggregates"): ("200", _AGGREGATE_BODY),
    ("GET", AGG): ("200", _AGGREGATE_BODY),
    ("PUT", AGG): ("200", _AGGREGATE_BODY),
    ("DELETE", AGG): ("200", {"description": "Deleted; empty body"}),
    ("POST", AGG + "/action"): ("200", _AGGREGATE_BODY),
    ("POST", AGG + "/images"): (
        "202",
        {
            "description": "Job queued; empty body",
            "headers": {"Location": {"description": "The job", "schema": {"type": "string"}}},
        },
    ),
    ("GET", AGG + "/images/jobs"): (
        "200", _json(_wrapped("jobs", {"type": "array", "items": _ref("Job")}), "Newest first"),
    ),
    ("GET", AGG + "/images/jobs/{job_id}"): (
        "200", _json(_wrapped("job", _ref("JobDetail")), "The job and its per-host results"),
    ),
    ("GET", PREFIX + "/images/{image_id}"): (
        "200", _json(_wrapped("image", {"type": "object"}), "A Glance v2 image body"),
    ),
    ("GET", PREFIX + "/images"): (
        "200", _json(_wrapped("images", {"type": "array"}), "Images found by id"),
    ),
    ("GET", PREFIX + "/v2/images"): (
        "200", _json(_wrapped("images", {"type": "array"}), "Images found by id"),
    ),
    ("GET", PREFIX + "/os-services"): (
        "200", _json(_wrapped("services", {"type": "array", "items": _ref("Service")}), "All"),
    ),
}

_STR = {"type": "string"}
_NSTR = {"type": ["string", "null"]}
_INT = {"type": "integer"}
_COUNTS = {"type": "object", "additionalProperties": _INT}
COMPONENTS: dict[str, dict[str, Any]] = {
    "Fault": {
        "type": "object",
        "description": "One key naming the fault (badRequest, itemNotFound, ...)",
        "additionalProperties": {
            "type": "object",
            "properties": {"message": _STR, "code": _INT, "error_code": _STR},
        },
    },
    "Version": {
        "type": "object",
        "properties": {k: _STR for k in ("id", "status", "version", "min_version", "updated")}
        | {"links": {"type": "array"}},
    },
    "Versions": _wrapped("versions", {"type": "array", "items": _ref("Version")}),
    "Aggregate": {
        "type": "object",
        "properties": {
            "id": _INT, "uuid": {**_STR, "description": "From microversion 2.41"},
            "name": _STR, "availability_zone": _NSTR,
            "hosts": {"type": "array", "items": _STR},
            "metadata": {"type": "object", "additionalProperties": _STR},
            "created_at": _STR, "updated_at": _NSTR, "deleted_at": {"type": "null"},
            "deleted": {"type": "boolean"},
        },
    },
    "Service": {
        "type": "object",
        "properties": {
            "id": {"type": ["integer", "string"], "description": "The uuid from 2.53"},
            "binary": _STR, "host": _STR, "zone": _STR,
            "status": {"enum": ["enabled", "disabled"]}, "state": {"enum": ["up", "down"]},
            "updated_at": _NSTR, "disabled_reason": _NSTR,
            "forced_down": {"type": "boolean", "description": "From microversion 2.11"},
        },
    },
    "Job": {
        "type": "object",
        "properties": {
            "id": _STR, "aggregate_id": _INT, "aggregate_uuid": _STR,
            "image_ids": {"type": "array", "items": _STR},
            "state": {"enum": ["queued", "running", "done", "failed"]}, "error": _NSTR,
            "total_hosts": _INT, "hosts_reported": _INT, "counts": _COUNTS,
            "bytes_downloaded": _INT, "created_at": _STR, "started_at": _NSTR,
            "finished_at": _NSTR, "links": {"type": "array"},
        },
    },
    "JobDetail": {
        "allOf": [
            _ref("Job"),
            _wrapped("hosts", {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "host": _STR, "bytes_downloaded": _INT,
                    "images": {"type": "array", "items": {
                        "type": "object",
                        "properties": {
                            "image_id": _STR,
                            "state": {"enum": ["cached", "existing", "error", "unsupported",
                                               "skipped"]},
                            "reason": _NSTR, "bytes_downloaded": _INT, "updated_at": _STR,
                        },
                    }},
                },
            }}),
        ],
    },
}


def _operation(method: str, path: str, func: Handler) -> dict[str, Any]:
    doc = (func.__doc__ or func.__name__).strip().splitlines()[0]
    status, success = SUCCESS.get((method, path), ("200", {"description": "OK"}))
    fault = _json(_ref("Fault"), "Error, in Nova's fault format")
    operation: dict[str, Any] = {
        "operationId": func.__name__,
        "summary": doc,
        "responses": {status: success, "default": fault},
    }
    body = REQUEST_BODIES.get((method, path))
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": body}}}
    min_version = getattr(func, "min_version", None)
    if min_version is not None:
        operation["x-openstack-min-microversion"] = str(min_version)
    if path in PUBLIC_PATHS:
        operation["security"] = []
    return operation


def build_document(declarations: RouteTable, server_url: str = "") -> dict[str, Any]:
    """The OpenAPI document of ``declarations``; ``server_url`` is the API's base URL."""
    paths: dict[str, Any] = {}
    for path, targets in declarations.items():
        item: dict[str, Any] = {method.lower(): _operation(method, path, func)
                                for method, func in targets.items()}
        names = re.findall(r"{(\w+)}", path)
        if names:
            item["parameters"] = [
                {"name": n, "in": "path", "required": True, "schema": _STR} for n in names
            ]
        paths[path] = item
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fleetcache compute API (Nova-compatible subset)",
            "version": str(microversion.MAX_VERSION),
            "description": "Microversions: send `OpenStack-API-Version: compute X` "
            f"({microversion.MIN_VERSION} to {microversion.MAX_VERSION}; none means "
            f"{microversion.MIN_VERSION}). See docs/api.md.",
        },
        "servers": [{"url": server_url or "/"}],
        "components": {
            "schemas": COMPONENTS,
            "securitySchemes": {"keystone": {"type": "apiKey", "in": "header",
                                             "name": "X-Auth-Token"}},
        },
        "security": [{"keystone": []}],
        "paths": paths,
    }
