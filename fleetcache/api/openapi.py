"""The OpenAPI 3.1 document, generated from a route table and the request schemas.

Every route of the table given (``routes.ROUTE_DECLARATIONS`` when served) appears, with its
handler's docstring as summary, the JSON Schema its body is validated with, and the microversion
it needs. Paths come from ``paths.py``, not from the route table, which imports this module
through the document's handler.

The document states what the validators enforce, so that a client generated from it (or a
fuzzer) is never refused for a reason it could not read: the request schemas themselves, the
path and query parameters, the microversion headers (required, with the versions a route
accepts, where a route needs more than the base version), and response schemas with their
``required`` fields (:mod:`fleetcache.api.openapi_responses`), so that checking a response
against them proves something.
"""

from __future__ import annotations

import re
from typing import Any

from fleetcache.api import microversion, util
from fleetcache.api.openapi_responses import (
    COMPONENTS,
    EXTRA_RESPONSES,
    SUCCESS,
    json_body,
    ref,
)
from fleetcache.api.paths import (
    AGGREGATE,
    FLAVOR,
    FLAVORS,
    HYPERVISOR,
    HYPERVISORS,
    LIMITS,
    PREFIX,
    PUBLIC_PATHS,
    QUOTA_SET,
    SERVER,
    SERVERS,
)
from fleetcache.api.router import Handler, RouteTable
from fleetcache.api.schemas import aggregate_images as image_schemas
from fleetcache.api.schemas import aggregates as aggregate_schemas
from fleetcache.api.schemas import flavor_access as flavor_access_schemas
from fleetcache.api.schemas import flavors as flavor_schemas
from fleetcache.api.schemas import parameter_types
from fleetcache.api.schemas import quota_sets as quota_schemas
from fleetcache.api.schemas import server_metadata as server_metadata_schemas
from fleetcache.api.schemas import servers as server_schemas

AGG = AGGREGATE
REQUEST_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", PREFIX + "/os-aggregates"): aggregate_schemas.CREATE,
    ("PUT", AGG): aggregate_schemas.UPDATE,
    ("POST", AGG + "/action"): {"oneOf": list(aggregate_schemas.ACTIONS.values())},
    # The widest: the terms from fleetcache 1.1 (each described with what it needs).
    ("POST", AGG + "/images"): image_schemas.CACHE_FLEETCACHE_1_1,
    # The widest body of each: description from 2.55, networks required from 2.37.
    ("POST", FLAVORS): flavor_schemas.CREATE_V2_55,
    ("PUT", FLAVOR): flavor_schemas.UPDATE_V2_55,
    ("POST", FLAVOR + "/action"): {"oneOf": list(flavor_access_schemas.ACTIONS.values())},
    ("POST", FLAVOR + "/os-extra_specs"): flavor_schemas.EXTRA_SPECS_CREATE,
    ("PUT", FLAVOR + "/os-extra_specs/{flavor_extra_spec_key}"):
        flavor_schemas.EXTRA_SPEC_UPDATE,
    ("POST", SERVERS): server_schemas.CREATE_V2_37,
    ("PUT", SERVER): server_schemas.UPDATE_V2_19,
    ("POST", SERVER + "/action"): {"oneOf": list(server_schemas.ACTIONS.values())},
    # The widest: 2.36 and 2.57 remove quotas.
    ("PUT", QUOTA_SET): quota_schemas.UPDATE,
    ("POST", SERVER + "/metadata"): server_metadata_schemas.METADATA_BODY,
    ("PUT", SERVER + "/metadata"): server_metadata_schemas.METADATA_BODY,
    ("PUT", SERVER + "/metadata/{key}"): server_metadata_schemas.META_BODY,
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
    "hypervisor_id": {"type": "string", "description": "The compute service's integer id "
                      "below 2.53 (anything else: 404), its uuid from 2.53 (anything else: "
                      "400)"},
    "hypervisor_hostname_pattern": {"type": "string",
                                    "description": "Text the host names must hold"},
    "server_id": {"type": "string", "description": "The server's uuid"},
    "key": {"type": "string", "description": "A key of the server's metadata"},
    "network_id": {"type": "string", "description": "Only 'none' exists"},
    "alias": {"type": "string", "description": "An extension alias (none exists)"},
    "project_id": {"type": "string", "minLength": 1, "maxLength": 255,
                   "description": "A Keystone project's id"},
}
_INT_QUERY = {"type": "string", "pattern": "^[0-9]{1,18}" + parameter_types.END}
#: Nova's paging (api/pagination.py).
_PAGING = [
    {"name": "limit", "in": "query", "required": False, "schema": _INT_QUERY,
     "description": "At most this many (and at most 1000)"},
    {"name": "marker", "in": "query", "required": False, "schema": {"type": "string"},
     "description": "The id of the last item of the previous page"},
]
_WITH_SERVERS = {"name": "with_servers", "in": "query", "required": False,
                 "schema": {"type": "string"},
                 "description": "From 2.53: true lists each host's servers (Nova's booleans; "
                 "400 for another value, or for any other query parameter)"}
QUERY_PARAMETERS: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("GET", PREFIX + "/os-services"): [
        {"name": "host", "in": "query", "required": False, "schema": {"type": "string"},
         "description": "Only the services of this host"},
        {"name": "binary", "in": "query", "required": False, "schema": {"type": "string"},
         "description": "Only the services of this binary: Nova's name (nova-compute, "
                        "nova-conductor) or fleetcache's (fleetcache-compute)"},
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
            {"name": "minRam", "in": "query", "required": False, "schema": _INT_QUERY,
             "description": "Only flavors with at least this RAM (MiB)"},
            {"name": "minDisk", "in": "query", "required": False, "schema": _INT_QUERY,
             "description": "Only flavors with at least this root disk (GiB)"},
            *_PAGING,
        ]
        for path in (FLAVORS, FLAVORS + "/detail")
    },
    **{
        ("GET", path): [
            {"name": "hypervisor_hostname_pattern", "in": "query", "required": False,
             "schema": {"type": "string"},
             "description": "From 2.53: only hosts whose name holds this text (404: none; "
             "400: other characters than letters, digits, '-', '.' and '_')"},
            _WITH_SERVERS,
            *_PAGING,
        ]
        for path in (HYPERVISORS, HYPERVISORS + "/detail")
    },
    ("GET", LIMITS): [
        {"name": "tenant_id", "in": "query", "required": False,
         "schema": {"type": "string", "minLength": 1, "maxLength": 255},
         "description": "Another project's limits (admins)"},
    ],
    **{
        (method, path): [
            {"name": "user_id", "in": "query", "required": False, "schema": {"type": "string"},
             "description": "Accepted; the answer is the project's (no per-user quotas)"},
        ]
        for method, path in (("GET", QUOTA_SET), ("GET", QUOTA_SET + "/detail"),
                             ("PUT", QUOTA_SET), ("DELETE", QUOTA_SET))
    },
    ("GET", HYPERVISOR): [_WITH_SERVERS],
    ("GET", PREFIX + "/networks"): [
        {"name": name, "in": "query", "required": False, "schema": {"type": "string"},
         "description": "Only the pseudo-network 'none' exists"} for name in ("id", "name")
    ],
    **{
        ("GET", path): [
            {"name": "all_tenants", "in": "query", "required": False,
             "schema": {"type": "string"},
             "description": "Every project's servers (admins); 0 or false: the caller's"},
            {"name": "name", "in": "query", "required": False,
             "schema": {"type": "string", "maxLength": 255},
             "description": "A regular expression searched in the names (no repeated "
             "group, no back-reference, at most two *, + or {m,n})"},
            {"name": "status", "in": "query", "required": False,
             "schema": {"type": "string"},
             "description": "Only servers in this status (any case; repeat for several); "
             "a status Nova does not know: an empty list below 2.38, 400 from 2.38"},
            {"name": "image", "in": "query", "required": False, "schema": {"type": "string"},
             "description": "Only servers of this image id"},
            {"name": "flavor", "in": "query", "required": False, "schema": {"type": "string"},
             "description": "Only servers of this flavor id"},
            *_PAGING,
        ]
        for path in (SERVERS, SERVERS + "/detail")
    },
}


#: The routes of fleetcache's own resource, which also read the ``fleetcache`` axis of
#: ``OpenStack-API-Version`` (``compute 2.81, fleetcache 1.1``).
EXTENSION_PATHS = frozenset({AGG + "/images", AGG + "/images/jobs",
                             AGG + "/images/jobs/{job_id}"})


def _extension_versions() -> list[str]:
    low, high = microversion.EXTENSION_MIN_VERSION, microversion.EXTENSION_MAX_VERSION
    return [str(microversion.Version(high.major, minor))
            for minor in range(low.minor, high.minor + 1)] + ["latest"]


def _version_headers(min_version: microversion.Version | None,
                     max_version: microversion.Version | None = None,
                     extension: bool = False) -> list[dict[str, Any]]:
    """The two microversion headers, with the versions the operation is served at.

    Without a header a request is served at the minimum version; a route that needs more
    requires ``OpenStack-API-Version`` (404 otherwise, as Nova). A route served up to a
    version below the maximum is not served at ``latest``. With ``extension`` the header
    may also name the fleetcache version (``compute 2.81, fleetcache 1.1``).
    """
    low = min_version or microversion.MIN_VERSION
    high = max_version or microversion.MAX_VERSION
    versions = [
        str(microversion.Version(microversion.MAX_VERSION.major, minor))
        for minor in range(low.minor, high.minor + 1)
    ] + (["latest"] if high == microversion.MAX_VERSION else [])
    required = min_version is not None and min_version > microversion.MIN_VERSION
    values = [f"{microversion.SERVICE_TYPE} {v}" for v in versions]
    description = "The microversion to serve the request at"
    if extension:
        values += [f"{compute}, {microversion.EXTENSION_SERVICE_TYPE} {v}"
                   for compute in list(values) for v in _extension_versions()]
        description += (f"; also the fleetcache version, {microversion.EXTENSION_SERVICE_TYPE}"
                        f" {microversion.EXTENSION_MIN_VERSION} without one")
    headers = [
        {"name": microversion.HEADER, "in": "header", "required": required,
         "schema": {"enum": values}, "description": description},
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
            return ref(name)
    if isinstance(schema, dict):
        return {key: _shared(value) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_shared(value) for value in schema]
    return schema


def _operation(method: str, path: str, func: Handler, operation_id: str) -> dict[str, Any]:
    doc = (func.__doc__ or func.__name__).strip().splitlines()[0]
    status, success = SUCCESS.get((method, path), ("200", {"description": "OK"}))
    fault = json_body(ref("Fault"), "Error, in Nova's fault format")
    min_version = getattr(func, "min_version", None)
    max_version = getattr(func, "max_version", None)
    if min_version == microversion.MIN_VERSION:
        min_version = None  # served without a header
    operation: dict[str, Any] = {
        "operationId": operation_id,
        "summary": doc,
        "parameters": (QUERY_PARAMETERS.get((method, path), [])
                       + _version_headers(min_version, max_version,
                                          extension=path in EXTENSION_PATHS)),
        "responses": {status: success, **EXTRA_RESPONSES.get((method, path), {}),
                      "default": fault},
    }
    body = REQUEST_BODIES.get((method, path))
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": _shared(body)}}}
    if min_version is not None:
        operation["x-openstack-min-microversion"] = str(min_version)
    if max_version is not None:
        operation["x-openstack-max-microversion"] = str(max_version)
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
            f"{microversion.MIN_VERSION}); fleetcache's own additions to its pre-cache "
            f"jobs also read `{microversion.EXTENSION_SERVICE_TYPE} X` in the same header "
            f"({microversion.EXTENSION_MIN_VERSION} to {microversion.EXTENSION_MAX_VERSION}; "
            "the pre-cache request's fleetcache:* terms need 1.1). Request bodies are JSON "
            f"(UTF-8, at most {util.MAX_JSON_DEPTH} levels deep, no lone surrogates) sent as "
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
