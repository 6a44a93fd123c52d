"""The OpenAPI document's responses: each route's success response and the shared component
schemas they refer to (``#/components/schemas/...``).

Kept apart from :mod:`fleetcache.api.openapi`, which builds the document from the route table
and the request side (bodies, path and query parameters, microversion headers): these are the
data, that is the assembly. Each schema lists its ``required`` fields, so that checking a real
response against it proves something (the API tests do).
"""

from __future__ import annotations

from typing import Any

from fleetcache.api.paths import AGGREGATE as AGG
from fleetcache.api.paths import (
    FLAVOR,
    FLAVORS,
    HOST_IMAGE_CACHE,
    HYPERVISOR,
    HYPERVISORS,
    LEGACY_PREFIX,
    LIMITS,
    OPENAPI,
    PREFIX,
    QUOTA_SET,
    SERVER,
    SERVERS,
    STATUS,
    STATUS_PROGRESS,
)
from fleetcache.api.schemas import aggregate_images as image_schemas
from fleetcache.common.db import jobs as db_jobs


def ref(name: str) -> dict[str, str]:
    """A reference to the component schema ``name``."""
    return {"$ref": f"#/components/schemas/{name}"}


def json_body(schema: dict[str, Any], description: str) -> dict[str, Any]:
    """A JSON response of ``schema``."""
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def wrapped(key: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An object whose one required member ``key`` is ``schema`` (Nova's envelopes)."""
    return {"type": "object", "properties": {key: schema}, "required": [key]}


def paged(key: str, item: dict[str, Any], description: str) -> dict[str, Any]:
    """A list of ``item`` under ``key``, with Nova's ``<key>_links`` on a full page."""
    schema = wrapped(key, {"type": "array", "items": item})
    schema["properties"][f"{key}_links"] = {"type": "array", "items": {
        "type": "object", "properties": {"rel": {"enum": ["next"]}, "href": {"type": "string"}},
        "required": ["rel", "href"]}}
    return json_body(schema, description)


_STR = {"type": "string"}
_NINT = {"type": ["integer", "null"]}
_BOOL = {"type": "boolean"}
_ARRAY = {"type": "array"}
_OBJECT = {"type": "object"}
_METADATA = {"type": "object", "additionalProperties": {"type": "string"}}
_NSTR = {"type": ["string", "null"]}
_INT = {"type": "integer"}
_COUNTS = {"type": "object", "additionalProperties": _INT}
#: A job's terms as the job shows them: the request's keys without their prefix.
_TERMS = {key.removeprefix(image_schemas.TERM_PREFIX): schema
          for key, schema in image_schemas.TERMS_PROPERTIES.items()}

_HTML_PAGE = {"description": "The status page (HTML)",
              "content": {"text/html": {"schema": {"type": "string"}}}}
_AGGREGATE_BODY = json_body(wrapped("aggregate", ref("Aggregate")), "The aggregate")
_QUOTA_SET_BODY = json_body(wrapped("quota_set", ref("QuotaSet")), "The quotas (-1: none)")
#: A limit: -1 is unlimited.
_LIMIT = {"type": "integer", "minimum": -1}
#: Quotas every microversion shows (the others go at 2.36 and 2.57).
_QUOTAS = ["instances", "cores", "ram", "metadata_items", "key_pairs", "server_groups",
           "server_group_members"]
#: Absolute limits every microversion shows.
_ABSOLUTE = ["maxTotalInstances", "maxTotalCores", "maxTotalRAMSize", "maxServerMeta",
             "maxTotalKeypairs", "maxServerGroups", "maxServerGroupMembers",
             "totalInstancesUsed", "totalCoresUsed", "totalRAMUsed", "totalServerGroupsUsed"]
SUCCESS: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    ("GET", "/"): ("200", json_body(ref("Versions"), "The API versions")),
    ("GET", LEGACY_PREFIX): (
        "200", json_body(wrapped("version", ref("Version")), "The legacy v2.0 entry")),
    ("GET", PREFIX): ("200", json_body(wrapped("version", ref("Version")), "v2.1")),
    ("GET", OPENAPI): ("200", {"description": "This document"}),
    ("GET", PREFIX + "/os-aggregates"): (
        "200",
        json_body(wrapped("aggregates", {"type": "array", "items": ref("Aggregate")}), "All"),
    ),
    ("POST", PREFIX + "/os-aggregates"): (
        "200", json_body(wrapped("aggregate", ref("AggregateCreated")), "The new aggregate"),
    ),
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
        "200", json_body(wrapped("jobs", {"type": "array", "items": ref("Job")}), "Newest first"),
    ),
    ("GET", AGG + "/images/jobs/{job_id}"): (
        "200", json_body(wrapped("job", ref("JobDetail")), "The job and its per-host results"),
    ),
    ("GET", PREFIX + "/images/{image_id}"): (
        "200", json_body(wrapped("image", {"type": "object"}), "A Glance v2 image body"),
    ),
    ("GET", PREFIX + "/images"): (
        "200", json_body(wrapped("images", {"type": "array"}), "Images found by id"),
    ),
    ("GET", PREFIX + "/v2/images"): (
        "200", json_body(wrapped("images", {"type": "array"}), "Images found by id"),
    ),
    ("GET", PREFIX + "/os-services"): (
        "200", json_body(wrapped("services", {"type": "array", "items": ref("Service")}), "All"),
    ),
    ("GET", HYPERVISORS): (
        "200", paged("hypervisors", ref("HypervisorSummary"), "The compute hosts"),
    ),
    ("GET", HYPERVISORS + "/detail"): (
        "200", paged("hypervisors", ref("Hypervisor"), "The compute hosts, with resources"),
    ),
    ("GET", HYPERVISORS + "/statistics"): (
        "200", json_body(wrapped("hypervisor_statistics", ref("HypervisorStatistics")),
                         "The enabled compute hosts' resources added up"),
    ),
    ("GET", HYPERVISOR): (
        "200", json_body(wrapped("hypervisor", ref("Hypervisor")), "The compute host"),
    ),
    ("GET", HYPERVISOR + "/uptime"): (
        "200", json_body(wrapped("hypervisor", ref("HypervisorUptime")),
                         "The compute host and its uptime(1) text"),
    ),
    ("GET", HYPERVISORS + "/{hypervisor_hostname_pattern}/search"): (
        "200", json_body(wrapped("hypervisors", {"type": "array",
                                                 "items": ref("HypervisorSummary")}),
                         "The compute hosts found (below 2.53)"),
    ),
    ("GET", HYPERVISORS + "/{hypervisor_hostname_pattern}/servers"): (
        "200", json_body(wrapped("hypervisors", {"type": "array",
                                                 "items": ref("HypervisorSummary")}),
                         "The compute hosts found, with their servers (below 2.53)"),
    ),
    ("GET", PREFIX + "/os-availability-zone"): (
        "200", json_body(wrapped("availabilityZoneInfo", {"type": "array",
                                                          "items": ref("AvailabilityZoneInfo")}),
                         "The zones (not the internal one)"),
    ),
    ("GET", PREFIX + "/os-availability-zone/detail"): (
        "200", json_body(wrapped("availabilityZoneInfo", {"type": "array",
                                                          "items": ref("AvailabilityZoneInfo")}),
                         "Every zone, with its hosts' enabled services"),
    ),
    ("GET", PREFIX + "/extensions"): (
        "200", json_body(wrapped("extensions", {"type": "array", "maxItems": 0}), "None"),
    ),
    ("GET", FLAVORS): (
        "200", paged("flavors", ref("FlavorSummary"), "The flavors the caller may see"),
    ),
    ("GET", FLAVORS + "/detail"): (
        "200", paged("flavors", ref("Flavor"), "The flavors the caller may see"),
    ),
    ("POST", FLAVORS): ("200", json_body(wrapped("flavor", ref("Flavor")), "The flavor")),
    ("GET", FLAVOR): ("200", json_body(wrapped("flavor", ref("Flavor")), "The flavor")),
    ("PUT", FLAVOR): ("200", json_body(wrapped("flavor", ref("Flavor")), "The flavor")),
    ("DELETE", FLAVOR): ("202", {"description": "Deleted; empty body"}),
    ("GET", FLAVOR + "/os-flavor-access"): (
        "200", json_body(ref("FlavorAccess"), "The projects the private flavor is shared with"),
    ),
    ("POST", FLAVOR + "/action"): (
        "200", json_body(ref("FlavorAccess"), "The projects the flavor is now shared with"),
    ),
    ("GET", FLAVOR + "/os-extra_specs"): (
        "200", json_body(wrapped("extra_specs", ref("ExtraSpecs")), "Every extra spec"),
    ),
    ("POST", FLAVOR + "/os-extra_specs"): (
        "200", json_body(wrapped("extra_specs", ref("ExtraSpecs")), "The specs given"),
    ),
    ("GET", FLAVOR + "/os-extra_specs/{flavor_extra_spec_key}"): (
        "200", json_body(ref("ExtraSpecs"), "{key: value}"),
    ),
    ("PUT", FLAVOR + "/os-extra_specs/{flavor_extra_spec_key}"): (
        "200", json_body(ref("ExtraSpecs"), "{key: value}"),
    ),
    ("DELETE", FLAVOR + "/os-extra_specs/{flavor_extra_spec_key}"): (
        "200", {"description": "Deleted; empty body"},
    ),
    ("GET", SERVERS): (
        "200", paged("servers", ref("ServerSummary"), "The project's servers, newest first"),
    ),
    ("GET", SERVERS + "/detail"): (
        "200", paged("servers", ref("Server"), "The project's servers, newest first"),
    ),
    ("POST", SERVERS): (
        "202", json_body({"anyOf": [wrapped("server", ref("ServerSummaryLinks")),
                                {"type": "object", "properties": {"reservation_id": _STR},
                                 "required": ["reservation_id"]}]},
                     "Accepted: the server (the first one), or the reservation id"),
    ),
    ("GET", SERVER): ("200", json_body(wrapped("server", ref("Server")), "The server")),
    ("PUT", SERVER): ("200", json_body(
        wrapped("server", {"anyOf": [ref("Server"), ref("ServerChanged")]}),
        "The server: from 2.75 as GET shows it; below, Nova's shorter view (ServerChanged)")),
    ("GET", PREFIX + "/networks"): (
        "200", json_body(wrapped("networks", {"type": "array", "items": _OBJECT}), "Found"),
    ),
    ("GET", PREFIX + "/networks/{network_id}"): (
        "200", json_body(wrapped("network", _OBJECT), "The pseudo-network 'none'"),
    ),
    ("DELETE", SERVER): ("204", {"description": "Deletion under way"}),
    **{(method, SERVER + "/metadata"): ("200", json_body(
        wrapped("metadata", _METADATA), "The server's metadata (after the change)"))
       for method in ("GET", "POST", "PUT")},
    **{(method, SERVER + "/metadata/{key}"): ("200", json_body(
        wrapped("meta", _METADATA), "The one key")) for method in ("GET", "PUT")},
    ("DELETE", SERVER + "/metadata/{key}"): ("204", {"description": "Deleted; empty body"}),
    ("POST", SERVER + "/action"): (
        # No content schema: os-stop and os-start answer an empty body, which no JSON
        # schema describes.
        "202", {"description": "rebuild: {\"server\": Server}, under way; os-stop, "
                "os-start: empty body"},
    ),
    ("GET", HOST_IMAGE_CACHE): (
        "200", json_body(wrapped("image_cache", ref("HostImageCache")), "As last reported"),
    ),
    ("GET", LIMITS): (
        "200", json_body(wrapped("limits", {
            "type": "object", "properties": {"rate": {"type": "array", "maxItems": 0},
                                             "absolute": ref("AbsoluteLimits")},
            "required": ["rate", "absolute"]}), "The project's limits and usage"),
    ),
    ("GET", QUOTA_SET): ("200", _QUOTA_SET_BODY),
    ("PUT", QUOTA_SET): ("200", json_body(wrapped("quota_set", ref("QuotaSet")),
                                          "The quotas, unchanged (Keystone holds them)")),
    ("DELETE", QUOTA_SET): ("202", {"description": "Nothing to revert; empty body"}),
    ("GET", QUOTA_SET + "/defaults"): ("200", _QUOTA_SET_BODY),
    ("GET", QUOTA_SET + "/detail"): (
        "200", json_body(wrapped("quota_set", ref("QuotaSetDetail")), "Limits and usage"),
    ),
    ("GET", STATUS): ("200", _HTML_PAGE),
    ("GET", STATUS_PROGRESS): (
        "200", json_body(wrapped("jobs", {"type": "array", "items": ref("JobProgress")}),
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
#: What Nova's PUT /servers/{id} and rebuild answer below 2.75 (its view without the zone,
#: usage times, extended states and attributes, volumes, key and config drive).
_SERVER_CHANGED = ["status", "tenant_id", "user_id", "metadata", "hostId", "image", "flavor",
                   "created", "updated", "addresses", "accessIPv4", "accessIPv6",
                   "OS-DCF:diskConfig"]
_SERVER_PROPERTIES: dict[str, Any] = {
    "status": {"enum": ["BUILD", "ACTIVE", "ERROR", "REBUILD", "DELETED", "SHUTOFF",
                        "UNKNOWN"]},
    "tenant_id": _STR, "user_id": _STR, "metadata": _OBJECT, "hostId": _STR,
    "image": _OBJECT, "flavor": _OBJECT, "created": _STR, "updated": _STR,
    "addresses": _OBJECT, "OS-EXT-STS:vm_state": _STR, "OS-EXT-STS:task_state": _NSTR,
    "OS-EXT-STS:power_state": _INT, "OS-EXT-AZ:availability_zone": _STR,
    "OS-SRV-USG:launched_at": _NSTR, "OS-SRV-USG:terminated_at": _NSTR,
    "OS-EXT-SRV-ATTR:host": {**_NSTR, "description": "Admins only"},
    "OS-EXT-SRV-ATTR:hypervisor_hostname": {**_NSTR, "description": "Admins only"},
    "progress": _INT,
    "description": {**_NSTR, "description": "From microversion 2.19"},
    "accessIPv4": _STR, "accessIPv6": _STR,
    "OS-DCF:diskConfig": {"enum": ["AUTO", "MANUAL"]},
    "fault": {
        "type": "object",
        "description": "In ERROR: why; details for admins (the filter summary of a "
        "failed schedule)",
        "properties": {"code": _INT, "created": _NSTR, "message": _STR,
                       "details": _STR},
        "required": ["code", "created", "message"],
    },
}
_HYPERVISOR_NUMBERS = ["vcpus", "memory_mb", "local_gb", "vcpus_used", "memory_mb_used",
                       "local_gb_used", "free_ram_mb", "free_disk_gb", "disk_available_least",
                       "current_workload", "running_vms"]
_AGGREGATE: dict[str, Any] = {
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
}
COMPONENTS: dict[str, dict[str, Any]] = {
    "AbsoluteLimits": {"type": "object", "properties": {name: _LIMIT for name in _ABSOLUTE},
                       "additionalProperties": _LIMIT, "required": _ABSOLUTE},
    "QuotaSet": {"type": "object", "properties": {"id": _STR}, "additionalProperties": _LIMIT,
                 "required": _QUOTAS},
    "QuotaSetDetail": {
        "type": "object", "properties": {"id": _STR}, "required": ["id", *_QUOTAS],
        "additionalProperties": {"type": "object", "properties": {
            "in_use": _INT, "limit": _LIMIT, "reserved": _INT},
            "required": ["in_use", "limit", "reserved"]},
    },
    "FlavorSummary": {
        "type": "object",
        "properties": {"id": _STR, "name": _STR, "links": _ARRAY,
                       "description": {**_NSTR, "description": "From microversion 2.55"}},
        "required": ["id", "name", "links"],
    },
    "Flavor": {
        "allOf": [ref("FlavorSummary")],
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
    "FlavorAccess": wrapped("flavor_access", {"type": "array", "items": {
        "type": "object", "properties": {"flavor_id": _STR, "tenant_id": _STR},
        "required": ["flavor_id", "tenant_id"], "additionalProperties": False}}),
    "ServerSummary": {
        "type": "object",
        "properties": {"id": _STR, "name": _STR, "links": _ARRAY},
        "required": ["id", "name", "links"],
    },
    "ServerSummaryLinks": {
        "type": "object",
        "properties": {"id": _STR, "links": _ARRAY, "OS-DCF:diskConfig": _STR,
                       "adminPass": {**_STR, "description": "Given, or generated; not kept"}},
        "required": ["id", "links"],
    },
    "Server": {
        "allOf": [ref("ServerSummary")],
        "type": "object",
        "properties": _SERVER_PROPERTIES,
        "required": _SERVER_DETAIL,
    },
    "ServerChanged": {
        "allOf": [ref("ServerSummary")],
        "type": "object",
        "properties": _SERVER_PROPERTIES,
        "required": _SERVER_CHANGED,
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
    "Versions": wrapped("versions", {"type": "array", "items": ref("Version")}),
    "Aggregate": _AGGREGATE,
    # Nova's create answers without hosts and metadata.
    "AggregateCreated": {
        "type": "object",
        "properties": {key: value for key, value in _AGGREGATE["properties"].items()
                       if key not in ("hosts", "metadata")},
        "required": [key for key in _AGGREGATE["required"] if key not in ("hosts", "metadata")],
        "additionalProperties": False,
    },
    "HypervisorSummary": {
        "type": "object",
        "properties": {
            "id": {"type": ["integer", "string"], "description": "The uuid from 2.53"},
            "hypervisor_hostname": _STR, "state": {"enum": ["up", "down"]},
            "status": {"enum": ["enabled", "disabled"]},
            "servers": {"type": "array", "items": {
                "type": "object", "properties": {"name": _STR, "uuid": _STR},
                "required": ["name", "uuid"]},
                "description": "With ?with_servers=true (2.53), on the servers route"},
        },
        "required": ["id", "hypervisor_hostname", "state", "status"],
    },
    "HypervisorUptime": {
        "allOf": [ref("HypervisorSummary")],
        "type": "object",
        "properties": {"uptime": _STR},
        "required": ["uptime"],
    },
    "HypervisorStatistics": {
        "type": "object",
        "properties": {"count": _INT, **{key: _INT for key in _HYPERVISOR_NUMBERS}},
        "required": ["count", *_HYPERVISOR_NUMBERS],
        "additionalProperties": False,
    },
    "Hypervisor": {
        "allOf": [ref("HypervisorSummary")],
        "type": "object",
        "properties": {
            "service": {"type": "object", "properties": {
                "id": {"type": ["integer", "string"]}, "host": _STR,
                "disabled_reason": _NSTR}, "required": ["id", "host", "disabled_reason"]},
            "hypervisor_type": _STR, "hypervisor_version": _INT,
            "host_ip": {**_NSTR, "description": "The compute's [DEFAULT] my_ip"},
            **{key: _INT for key in _HYPERVISOR_NUMBERS},
            "cpu_info": {"type": ["object", "string"], "description": "A string below 2.28"},
        },
        "required": ["service", "hypervisor_type", "hypervisor_version", "host_ip",
                     *_HYPERVISOR_NUMBERS, "cpu_info"],
    },
    "AvailabilityZoneInfo": {
        "type": "object",
        "properties": {
            "zoneName": _STR,
            "zoneState": {"type": "object", "properties": {"available": _BOOL},
                          "required": ["available"]},
            "hosts": {"type": ["object", "null"], "description": "host -> binary -> "
                      "{available, active, updated_at}; null but in the detail's available "
                      "zones"},
        },
        "required": ["zoneName", "zoneState", "hosts"],
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
            "state": {"enum": list(db_jobs.JOB_STATES)},
            "error": _NSTR, "catch_up_until": _NSTR,
            # the request's terms ({} without), and while scheduled when the job starts
            "terms": {"type": "object", "properties": _TERMS,
                      "additionalProperties": False},
            "next_start_at": _NSTR,
            "total_hosts": _INT, "hosts_reported": _INT, "counts": _COUNTS,
            "bytes_downloaded": _INT, "created_at": _STR, "started_at": _NSTR,
            "finished_at": _NSTR, "pin_until": _NSTR, "links": {"type": "array"},
            # where the downloaded copies came from (peer distribution)
            "distribution": {"type": "object", "properties": {
                "origin_copies": _INT, "peer_copies": _INT, "bytes_from_origin": _INT,
                "bytes_from_peers": _INT, "offload_percent": {"type": "number"},
                "time_to_all_hosts": {"type": ["number", "null"]}},
                "required": ["origin_copies", "peer_copies", "bytes_from_origin",
                             "bytes_from_peers", "offload_percent", "time_to_all_hosts"]},
        },
        "required": ["id", "aggregate_id", "aggregate_uuid", "image_ids", "state", "error",
                     "total_hosts", "hosts_reported", "counts", "bytes_downloaded",
                     "created_at", "started_at", "finished_at", "links", "distribution",
                     "terms", "next_start_at"],
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
            "id": _STR, "state": {"enum": list(db_jobs.JOB_STATES)},
            "total_hosts": _INT, "hosts_reported": _INT, "counts": _COUNTS,
        },
        "required": ["id", "state", "total_hosts", "hosts_reported", "counts"],
    },
    "JobDetail": {
        "allOf": [
            ref("Job"),
            wrapped("hosts", {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "host": _STR, "bytes_downloaded": _INT,
                    "images": {"type": "array", "items": {
                        "required": ["image_id", "state", "reason", "bytes_downloaded",
                                     "download_path", "fallback_reason", "source_host",
                                     "bytes_from_peers", "updated_at"],
                        "type": "object",
                        "properties": {
                            "image_id": _STR,
                            "state": {"enum": list(db_jobs.STORED_STATES)},
                            "reason": _NSTR, "bytes_downloaded": _INT,
                            # rbd, http or peer for a download; as the compute reported it
                            "download_path": _NSTR,
                            "fallback_reason": _NSTR, "updated_at": _STR,
                            # the peer that sent the bytes, and how many of them peers sent
                            "source_host": _NSTR, "bytes_from_peers": _NINT,
                        },
                    }},
                },
                "required": ["host", "bytes_downloaded", "images"],
            }}),
        ],
    },
}
