"""The route table of the API: each path, and the handler of each of its methods.

The router (``router.py``) dispatches on it and the OpenAPI document (``openapi.py``) describes
it. The document's handler is given this table rather than importing it, so that imports run
one way: routes -> handlers -> openapi -> paths.
"""

from __future__ import annotations

from fleetcache.api.handlers import (
    aggregate_images,
    aggregates,
    availability_zones,
    extensions,
    flavor_access,
    flavor_extra_specs,
    flavors,
    host_image_cache,
    hypervisor_uptime,
    hypervisors,
    images,
    limits,
    networks,
    openapi,
    quota_sets,
    server_actions,
    server_metadata,
    servers,
    services,
    status,
    versions,
)
from fleetcache.api.paths import (
    AGGREGATE,
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
from fleetcache.api.router import Handler

ROUTE_DECLARATIONS: dict[str, dict[str, Handler]] = {}
ROUTE_DECLARATIONS.update(
    {
        "/": {"GET": versions.list_versions},
        LEGACY_PREFIX: {"GET": versions.get_legacy_version},
        PREFIX: {"GET": versions.get_version},
        # The document describes the whole table, its own route included.
        OPENAPI: {"GET": openapi.document_handler(ROUTE_DECLARATIONS)},
        PREFIX + "/os-aggregates": {
            "GET": aggregates.list_aggregates,
            "POST": aggregates.create_aggregate,
        },
        AGGREGATE: {
            "GET": aggregates.get_aggregate,
            "PUT": aggregates.update_aggregate,
            "DELETE": aggregates.delete_aggregate,
        },
        AGGREGATE + "/action": {"POST": aggregates.post_aggregate_action},
        AGGREGATE + "/images": {"POST": aggregate_images.cache_aggregate_images},
        AGGREGATE + "/images/jobs": {"GET": aggregate_images.list_aggregate_image_jobs},
        AGGREGATE + "/images/jobs/{job_id}": {"GET": aggregate_images.get_aggregate_image_job},
        PREFIX + "/os-services": {"GET": services.list_services},
        HYPERVISORS: {"GET": hypervisors.list_hypervisors},
        # Before HYPERVISOR: "detail" and "statistics" are no hypervisor ids.
        HYPERVISORS + "/detail": {"GET": hypervisors.list_hypervisors_detail},
        HYPERVISORS + "/statistics": {"GET": hypervisors.get_hypervisor_statistics},
        HYPERVISOR: {"GET": hypervisors.get_hypervisor},
        HYPERVISOR + "/uptime": {"GET": hypervisor_uptime.get_hypervisor_uptime},
        HYPERVISORS + "/{hypervisor_hostname_pattern}/search": {
            "GET": hypervisors.search_hypervisors},
        HYPERVISORS + "/{hypervisor_hostname_pattern}/servers": {
            "GET": hypervisors.list_hypervisor_servers},
        PREFIX + "/os-availability-zone": {
            "GET": availability_zones.list_availability_zones},
        PREFIX + "/os-availability-zone/detail": {
            "GET": availability_zones.list_availability_zones_detail},
        PREFIX + "/extensions": {"GET": extensions.list_extensions},
        PREFIX + "/extensions/{alias}": {"GET": extensions.get_extension},
        FLAVORS: {"GET": flavors.list_flavors, "POST": flavors.create_flavor},
        # Before FLAVOR: "detail" is not a flavor id (nor, below, a server id).
        FLAVORS + "/detail": {"GET": flavors.list_flavors_detail},
        FLAVOR: {
            "GET": flavors.get_flavor,
            "PUT": flavors.update_flavor,
            "DELETE": flavors.delete_flavor,
        },
        FLAVOR + "/action": {"POST": flavor_access.post_flavor_action},
        FLAVOR + "/os-flavor-access": {"GET": flavor_access.list_flavor_access},
        FLAVOR + "/os-extra_specs": {
            "GET": flavor_extra_specs.list_flavor_extra_specs,
            "POST": flavor_extra_specs.create_flavor_extra_specs,
        },
        FLAVOR + "/os-extra_specs/{flavor_extra_spec_key}": {
            "GET": flavor_extra_specs.get_flavor_extra_spec,
            "PUT": flavor_extra_specs.update_flavor_extra_spec,
            "DELETE": flavor_extra_specs.delete_flavor_extra_spec,
        },
        SERVERS: {"GET": servers.list_servers, "POST": servers.create_server},
        SERVERS + "/detail": {"GET": servers.list_servers_detail},
        SERVER: {"GET": servers.get_server, "PUT": servers.update_server,
                 "DELETE": servers.delete_server},
        SERVER + "/action": {"POST": server_actions.post_server_action},
        # Quotas: Keystone's unified limits (see handlers/quota_sets.py).
        LIMITS: {"GET": limits.get_limits},
        QUOTA_SET: {"GET": quota_sets.get_quota_set, "PUT": quota_sets.update_quota_set,
                    "DELETE": quota_sets.delete_quota_set},
        QUOTA_SET + "/defaults": {"GET": quota_sets.get_quota_set_defaults},
        QUOTA_SET + "/detail": {"GET": quota_sets.get_quota_set_detail},
        SERVER + "/metadata": {
            "GET": server_metadata.list_server_metadata,
            "POST": server_metadata.create_server_metadata,
            "PUT": server_metadata.replace_server_metadata,
        },
        SERVER + "/metadata/{key}": {
            "GET": server_metadata.get_server_metadata_item,
            "PUT": server_metadata.set_server_metadata_item,
            "DELETE": server_metadata.delete_server_metadata_item,
        },
        # The pseudo-network "none" that `openstack server create --network none` looks up
        # (not Nova's; see handlers/networks.py).
        PREFIX + "/networks": {"GET": networks.list_networks},
        PREFIX + "/networks/{network_id}": {"GET": networks.get_network},
        # Image look-ups for clients without an image endpoint (not Nova's; see
        # handlers/images.py for the requests the clients send).
        PREFIX + "/images": {"GET": images.list_images},
        PREFIX + "/images/{image_id}": {"GET": images.get_image},
        PREFIX + "/v2/images": {"GET": images.list_images},
        # fleetcache extensions: a host's image cache, the status page and its feed.
        HOST_IMAGE_CACHE: {"GET": host_image_cache.list_host_image_cache},
        STATUS: {"GET": status.get_status},
        STATUS_PROGRESS: {"GET": status.get_status_progress},
    }
)
