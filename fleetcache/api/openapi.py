"""The OpenAPI 3.1 document, generated from a route table and the request schemas.

Every route of the table given (``routes.ROUTE_DECLARATIONS`` when served) appears, with its
handler's docstring as summary, the JSON Schema its body is validated with, and the microversion
it needs. Paths come from ``paths.py``, not from the route table, which imports this module
through the document's handler.

The document states what the validators enforce, so that a client generated from it (or a
fuzzer) is never refused for a reason it could not read: the request schemas themselves, the
path and query parameters, the microversion headers (required, with the versions a route
accepts, where a route needs more than the base version), and response schemas with their
``required`` fields, so that checking a response against them proves something.
"""

from __future__ import annotations

import re
from typing import Any

from fleetcache.api import microversion, util
from fleetcache.api.paths import (
    AGGREGATE,
    FLAVOR,
    FLAVORS,
    HOST_IMAGE_CACHE,
    OPENAPI,
    PREFIX,
    PUBLIC_PATHS,
    SERVER,
    SERVERS,
    STATUS,
    STATUS_PROGRESS,
)
from fleetcache.api.router import Handler, RouteTable
from fleetcache.api.schemas import aggregate_images as image_schemas
from fleetcache.api.schemas import aggregates as aggregate_schemas
from fleetcache.api.schemas import flavors as flavor_schemas
from fleetcache.api.schemas import parameter_types
from fleetcache.api.schemas import servers as server_schemas
from fleetcache.common.db import jobs as db_jobs

AGG = AGGREGATE
REQUEST_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", PREFIX + "/os-aggregates"): aggregate_schemas.CREATE,
    ("PUT", AGG): aggregate_schemas.UPDATE,
    ("POST", AGG + "/action"): {"oneOf": list(aggregate_schemas.ACTIONS.values())},
    ("POST", AGG + "/images"): image_schemas.CACHE_V2_81,
    # The widest body of each: description from 2.55, networks required from 2.37.
    ("POST", FLAVORS): flavor_schemas.CREATE_V2_55,
    ("PUT", FLAVOR): flavor_schemas.UPDATE_V2_55,
    ("POST", FLAVOR + "/os-extra_specs"): flavor_schemas.EXTRA_SPECS_CREATE,
    ("PUT", FLAVOR + "/os-extra_specs/{flavor_extra_spec_key}"):
        flavor_schemas.EXTRA_SPEC_UPDATE,
    ("POST", SERVERS): server_schemas.CREATE,
    ("POST", SERVER + "/action"): {"oneOf": list(server_schemas.ACTIONS.values())},
}

#: Schemas shared by several bodies, published once under ``components`` (a name pattern is
#: 12 KB); they are replaced by a reference wherever the very same object appears.
SHARED_SCHEMAS: dict[str, dict[str, Any]] = {
    "Name": parameter_types.NAME,
    "AvailabilityZone": parameter_types.AVAILABILITY_ZONE,
}
_INT_ID = {"type": "string", "pattern": "^[0-9]{1,18}" + parameter_types.END}
PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "aggregate_id": {**_INT_ID, "description": "The aggregate's integer id (GET also takes "
                     "its uuid); anything else is an unknown aggregate (404)"},
    "job_id": {"type": "string", "format": "uuid"},
    "image_id": {"type": "string"},
    "host": {"type": "string", "minLength": 1, "maxLength": 255,
             "description": "A compute host's name"},
    "flavor_id": {"type": "string", "description": "The flavor's id (not its name)"},
    "flavor_extra_spec_key": {"type": "string"},
    "server_id": {"type": "string", "description": "The server's uuid"},
    "network_id": {"type": "string", "description": "Only 'none' exists"},
}
QUERY_PARAMETERS: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("GET", PREFIX + "/os-services"): [
        {"name": "host", "in": "query", "required": False, "schema": {"type": "string"},
         "description": "Only the services of this host"},
        {"name": "binary", "in": "query", "required": False, "schema": {"type": "string"},
         "description": "Only the services of this binary, e.g. fleetcache-compute"},
    ],
    **{
        ("GET", path): [
            {"name": "id", "in": "query", "required": False, "schema": {"type": "string"},
             "description": "An image id, or in:ID1,ID2 (repeatable); other filters find "
             "nothing"},
        ]
        for path in (PREFIX + "/images", PREFIX + "/v2/images")
    },
    **{
        ("GET", path): [
            {"name": "is_public", "in": "query", "required": False,
             "schema": {"type": "string"},
             "description": "true (default), false or none (both); admins only, others "
             "always get the public flavors"},
        ]
        for path in (FLAVORS, FLAVORS + "/detail")
    },
    ("GET", PREFIX + "/networks"): [
        {"name": name, "in": "query", "required": False, "schema": {"type": "string"},
         "description": "Only the pseudo-network 'none' exists"} for name in ("id", "name")
    ],
    **{
        ("GET", path): [
            {"name": "all_tenants", "in": "query", "required": False,
             "schema": {"type": "string"},
             "description": "Every project's servers (admins); 0 or false: the caller's"},
        ]
        for path in (SERVERS, SERVERS + "/detail")
    },
}


def _version_headers(min_version: microversion.Version | None) -> list[dict[str, Any]]:
    """The two microversion headers, with the versions the operation is served at.

    Without a header a request is served at the minimum version; a route that needs more
    requires ``OpenStack-API-Version`` (404 otherwise, as Nova).
    """
    low = min_version or microversion.MIN_VERSION
    versions = [
        str(microversion.Version(microversion.MAX_VERSION.major, minor))
        for minor in range(low.minor, microversion.MAX_VERSION.minor + 1)
    ] + ["latest"]
    required = min_version is not None and min_version > microversion.MIN_VERSION
    headers = [
        {"name": microversion.HEADER, "in": "header", "required": required,
         "schema": {"enum": [f"{microversion.SERVICE_TYPE} {v}" for v in versions]},
         "description": "The microversion to serve the request at"},
    ]
    if not required:
        headers.append({"name": microversion.LEGACY_HEADER, "in": "header", "required": False,
                        "schema": {"enum": versions},
                        "description": "The legacy form of the microversion header"})
    return headers


def _shared(schema: Any) -> Any:
    """``schema`` with each of :data:`SHARED_SCHEMAS` replaced by a reference."""
    for name, shared in SHARED_SCHEMAS.items():
        if schema is shared:
            return _ref(name)
    if isinstance(schema, dict):
        return {key: _shared(value) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_shared(value) for value in schema]
    return schema


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _wrapped(key: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {key: schema}, "required": [key]}


_STR = {"type": "string"}
_NINT = {"type": ["integer", "null"]}
_BOOL = {"type": "boolean"}
_ARRAY = {"type": "array"}
_OBJECT = {"type": "object"}
_NSTR = {"type": ["string", "null"]}
_INT = {"type": "integer"}
_COUNTS = {"type": "object", "additionalProperties": _INT}

_HTML_PAGE = {"description": "The status page (HTML)",
              "content": {"text/html": {"schema": {"type": "string"}}}}
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
    ("GET", FLAVORS): (
        "200", _json(_wrapped("flavors", {"type": "array", "items": _ref("FlavorSummary")}),
                     "The flavors the caller may see"),
    ),
    ("GET", FLAVORS + "/detail"): (
        "200", _json(_wrapped("flavors", {"type": "array", "items": _ref("Flavor")}),
                     "The flavors the caller may see"),
    ),
    ("POST", FLAVORS): ("200", _json(_wrapped("flavor", _ref("Flavor")), "The flavor")),
    ("GET", FLAVOR): ("200", _json(_wrapped("flavor", _ref("Flavor")), "The flavor")),
    ("PUT", FLAVOR): ("200", _json(_wrapped("flavor", _ref("Flavor")), "The flavor")),
    ("DELETE", FLAVOR): ("202", {"description": "Deleted; empty body"}),
    ("GET", FLAVOR + "/os-extra_specs"): (
        "200", _json(_wrapped("extra_specs", _ref("ExtraSpecs")), "Every extra spec"),
    ),
    ("POST", FLAVOR + "/os-extra_specs"): (
        "200", _json(_wrapped("extra_specs", _ref("ExtraSpecs")), "The specs given"),
    ),
    ("GET", FLAVOR + "/os-extra_specs/{flavor_extra_spec_key}"): (
        "200", _json(_ref("ExtraSpecs"), "{key: value}"),
    ),
    ("PUT", FLAVOR + "/os-extra_specs/{flavor_extra_spec_key}"): (
        "200", _json(_ref("ExtraSpecs"), "{key: value}"),
    ),
    ("DELETE", FLAVOR + "/os-extra_specs/{flavor_extra_spec_key}"): (
        "200", {"description": "Deleted; empty body"},
    ),
    ("GET", SERVERS): (
        "200", _json(_wrapped("servers", {"type": "array", "items": _ref("ServerSummary")}),
                     "The project's servers, newest first"),
    ),
    ("GET", SERVERS + "/detail"): (
        "200", _json(_wrapped("servers", {"type": "array", "items": _ref("Server")}),
                     "The project's servers, newest first"),
    ),
    ("POST", SERVERS): (
        "202", _json({"anyOf": [_wrapped("server", _ref("ServerSummaryLinks")),
                                {"type": "object", "properties": {"reservation_id": _STR},
                                 "required": ["reservation_id"]}]},
                     "Accepted: the server (the first one), or the reservation id"),
    ),
    ("GET", SERVER): ("200", _json(_wrapped("server", _ref("Server")), "The server")),
    ("GET", PREFIX + "/networks"): (
        "200", _json(_wrapped("networks", {"type": "array", "items": _OBJECT}), "Found"),
    ),
    ("GET", PREFIX + "/networks/{network_id}"): (
        "200", _json(_wrapped("network", _OBJECT), "The pseudo-network 'none'"),
    ),
    ("DELETE", SERVER): ("204", {"description": "Deletion under way"}),
    ("POST", SERVER + "/action"): (
        "202", _json(_wrapped("server", _ref("Server")), "Rebuild under way"),
    ),
    ("GET", HOST_IMAGE_CACHE): (
        "200", _json(_wrapped("image_cache", _ref("HostImageCache")), "As last reported"),
    ),
    ("GET", STATUS): ("200", _HTML_PAGE),
    ("GET", STATUS_PROGRESS): (
        "200", _json(_wrapped("jobs", {"type": "array", "items": _ref("JobProgress")}),
                     "The status page's jobs, newest first"),
    ),
}
#: More responses than the success and the fault: the status page's sign-in form (a browser
#: that ``auth_token`` refused gets it instead of the JSON fault).
EXTRA_RESPONSES: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", STATUS): {"401": {"description": "Sign-in form (Keystone, no valid token)",
                              "content": {"text/html": {"schema": {"type": "string"}}}}},
}

_FLAVOR_DETAIL = ["ram", "disk", "vcpus", "OS-FLV-EXT-DATA:ephemeral",
                  "OS-FLV-DISABLED:disabled", "swap", "rxtx_factor",
                  "os-flavor-access:is_public"]
_SERVER_DETAIL = ["status", "tenant_id", "user_id", "metadata", "hostId", "image", "flavor",
                  "created", "updated", "addresses", "OS-EXT-STS:vm_state",
                  "OS-EXT-STS:task_state", "OS-EXT-STS:power_state",
                  "OS-EXT-AZ:availability_zone", "OS-SRV-USG:launched_at"]
COMPONENTS: dict[str, dict[str, Any]] = {
    "FlavorSummary": {
        "type": "object",
        "properties": {"id": _STR, "name": _STR, "links": _ARRAY,
                       "description": {**_NSTR, "description": "From microversion 2.55"}},
        "required": ["id", "name", "links"],
    },
    "Flavor": {
        "allOf": [_ref("FlavorSummary")],
        "type": "object",
        "properties": {
            "ram": _INT, "disk": _INT, "vcpus": _INT, "OS-FLV-EXT-DATA:ephemeral": _INT,
            "OS-FLV-DISABLED:disabled": _BOOL,
            "swap": {"type": ["integer", "string"], "description": "0 is \"\" below 2.75"},
            "rxtx_factor": {"type": "number"}, "os-flavor-access:is_public": _BOOL,
            "extra_specs": {**_OBJECT, "description": "From microversion 2.61"},
        },
        "required": _FLAVOR_DETAIL,
    },
    "ExtraSpecs": {"type": "object", "additionalProperties": _STR},
    "ServerSummary": {
        "type": "object",
        "properties": {"id": _STR, "name": _STR, "links": _ARRAY},
        "required": ["id", "name", "links"],
    },
    "ServerSummaryLinks": {
        "type": "object",
        "properties": {"id": _STR, "links": _ARRAY, "OS-DCF:diskConfig": _STR},
        "required": ["id", "links"],
    },
    "Server": {
        "allOf": [_ref("ServerSummary")],
        "type": "object",
        "properties": {
            "status": {"enum": ["BUILD", "ACTIVE", "ERROR", "REBUILD", "DELETED", "UNKNOWN"]},
            "tenant_id": _STR, "user_id": _STR, "metadata": _OBJECT, "hostId": _STR,
            "image": _OBJECT, "flavor": _OBJECT, "created": _STR, "updated": _STR,
            "addresses": _OBJECT, "OS-EXT-STS:vm_state": _STR, "OS-EXT-STS:task_state": _NSTR,
            "OS-EXT-STS:power_state": _INT, "OS-EXT-AZ:availability_zone": _STR,
            "OS-SRV-USG:launched_at": _NSTR, "OS-SRV-USG:terminated_at": _NSTR,
            "OS-EXT-SRV-ATTR:host": {**_NSTR, "description": "Admins only"},
            "OS-EXT-SRV-ATTR:hypervisor_hostname": {**_NSTR, "description": "Admins only"},
            "progress": _INT,
            "fault": {
                "type": "object",
                "description": "In ERROR: why; details for admins (the filter summary of a "
                "failed schedule)",
                "properties": {"code": _INT, "created": _NSTR, "message": _STR,
                               "details": _STR},
                "required": ["code", "created", "message"],
            },
        },
        "required": _SERVER_DETAIL,
    },
    "Fault": {
        "type": "object",
        "description": "One key naming the fault (badRequest, itemNotFound, ...)",
        "minProperties": 1,
        "maxProperties": 1,
        "additionalProperties": {
            "type": "object",
            "properties": {"message": _STR, "code": _INT, "error_code": _STR},
            "required": ["message", "code", "error_code"],
        },
    },
    "Version": {
        "type": "object",
        "properties": {k: _STR for k in ("id", "status", "version", "min_version", "updated")}
        | {"links": {"type": "array"}},
        "required": ["id", "status", "version", "min_version", "updated", "links"],
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
        "required": ["id", "name", "availability_zone", "hosts", "metadata", "created_at",
                     "updated_at", "deleted_at", "deleted"],
        "additionalProperties": False,
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
        "required": ["id", "binary", "host", "zone", "status", "state", "updated_at",
                     "disabled_reason"],
        "additionalProperties": False,
    },
    "Job": {
        "type": "object",
        "properties": {
            "id": _STR, "aggregate_id": _INT, "aggregate_uuid": _STR,
            "image_ids": {"type": "array", "items": _STR},
            "state": {"enum": ["queued", "running", "catching_up", "done", "failed"]},
            "error": _NSTR, "catch_up_until": _NSTR,
            "total_hosts": _INT, "hosts_reported": _INT, "counts": _COUNTS,
            "bytes_downloaded": _INT, "created_at": _STR, "started_at": _NSTR,
            "finished_at": _NSTR, "pin_until": _NSTR, "links": {"type": "array"},
        },
        "required": ["id", "aggregate_id", "aggregate_uuid", "image_ids", "state", "error",
                     "total_hosts", "hosts_reported", "counts", "bytes_downloaded",
                     "created_at", "started_at", "finished_at", "links"],
    },
    "HostImageCache": {
        "type": "object",
        "properties": {
            "host": _STR, "usage_bytes": _INT, "image_count": _INT, "reported_at": _NSTR,
            "images": {"type": "array", "items": {
                "type": "object",
                # pinned_until: null when the image is not (or no longer) pinned
                "properties": {"image_id": _STR, "size": _INT, "last_used": _STR,
                               "pinned_until": _NSTR},
                "required": ["image_id", "size", "last_used", "pinned_until"],
            }},
            # the unfinished jobs that cache images here when the host comes back
            "pending_catch_ups": {"type": "array", "items": {
                "type": "object",
                "properties": {"job_id": _STR, "aggregate_id": _INT,
                               "image_ids": {"type": "array", "items": _STR},
                               "until": _NSTR},
                "required": ["job_id", "aggregate_id", "image_ids", "until"],
            }},
        },
        "required": ["host", "usage_bytes", "image_count", "reported_at", "images",
                     "pending_catch_ups"],
    },
    "JobProgress": {
        "type": "object",
        "properties": {
            "id": _STR, "state": {"enum": ["queued", "running", "done", "failed"]},
            "total_hosts": _INT, "hosts_reported": _INT, "counts": _COUNTS,
        },
        "required": ["id", "state", "total_hosts", "hosts_reported", "counts"],
    },
    "JobDetail": {
        "allOf": [
            _ref("Job"),
            _wrapped("hosts", {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "host": _STR, "bytes_downloaded": _INT,
                    "images": {"type": "array", "items": {
                        "required": ["image_id", "state", "reason", "bytes_downloaded",
                                     "download_path", "fallback_reason", "updated_at"],
                        "type": "object",
                        "properties": {
                            "image_id": _STR,
                            "state": {"enum": list(db_jobs.STORED_STATES)},
                            "reason": _NSTR, "bytes_downloaded": _INT,
                            # rbd or http for a download; as the compute reported it
                            "download_path": _NSTR,
                            "fallback_reason": _NSTR, "updated_at": _STR,
                        },
                    }},
                },
                "required": ["host", "bytes_downloaded", "images"],
            }}),
        ],
    },
}


def _operation(method: str, path: str, func: Handler, operation_id: str) -> dict[str, Any]:
    doc = (func.__doc__ or func.__name__).strip().splitlines()[0]
    status, success = SUCCESS.get((method, path), ("200", {"description": "OK"}))
    fault = _json(_ref("Fault"), "Error, in Nova's fault format")
    min_version = getattr(func, "min_version", None)
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": doc,
        "parameters": QUERY_PARAMETERS.get((method, path), []) + _version_headers(min_version),
        "responses": {status: success, **EXTRA_RESPONSES.get((method, path), {}),
                      "default": fault},
    }
    body = REQUEST_BODIES.get((method, path))
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": _shared(body)}}}
    if min_version is not None:
        operation["x-openstack-min-microversion"] = str(min_version)
    if path in PUBLIC_PATHS:
        operation["security"] = []
    return operation


def _operation_ids(declarations: RouteTable) -> dict[tuple[str, str], str]:
    """Each operation's id: its handler's name, made unique with the path where one handler
    serves several paths."""
    ids: dict[tuple[str, str], str] = {}
    for path, targets in declarations.items():
        for method, func in targets.items():
            name = func.__name__
            if name in ids.values():
                name += "_" + "_".join(re.findall(r"\w+", path.replace(".", "_")))
            ids[(method, path)] = name
    return ids


def build_document(declarations: RouteTable, server_url: str = "") -> dict[str, Any]:
    """The OpenAPI document of ``declarations``; ``server_url`` is the API's base URL."""
    paths: dict[str, Any] = {}
    ids = _operation_ids(declarations)
    for path, targets in declarations.items():
        item: dict[str, Any] = {
            method.lower(): _operation(method, path, func, ids[(method, path)])
            for method, func in targets.items()
        }
        names = re.findall(r"{(\w+)}", path)
        if names:
            item["parameters"] = [
                {"name": n, "in": "path", "required": True, "schema": PATH_PARAMETERS[n]}
                for n in names
            ]
        paths[path] = item
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "fleetcache compute API (Nova-compatible subset)",
            "version": str(microversion.MAX_VERSION),
            "description": "Microversions: send `OpenStack-API-Version: compute X` "
            f"({microversion.MIN_VERSION} to {microversion.MAX_VERSION}; none means "
            f"{microversion.MIN_VERSION}). Request bodies are JSON (UTF-8, at most "
            f"{util.MAX_JSON_DEPTH} levels deep, no lone surrogates) sent as "
            "application/json, at most [oslo_middleware] max_request_body_size bytes "
            "(114,688 by default: 413 above, 415 for another media type). See docs/api.md.",
        },
        "servers": [{"url": server_url or "/"}],
        "components": {
            "schemas": COMPONENTS | SHARED_SCHEMAS,
            "securitySchemes": {"keystone": {"type": "apiKey", "in": "header",
                                             "name": "X-Auth-Token"}},
        },
        "security": [{"keystone": []}],
        "paths": paths,
    }
