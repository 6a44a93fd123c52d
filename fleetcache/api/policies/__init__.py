"""Default policies, one module per REST resource; ``list_rules`` feeds oslo.policy's tools.

Entry point ``oslo.policy.policies``: ``fleetcache = fleetcache.api.policies:list_rules``.
Defaults are Nova's: admin-only (``context_is_admin``, i.e. ``role:admin``) for aggregates,
pre-caching, services and flavor changes; project member or reader for servers; anyone reads
its own project's limits and default quotas, its readers its quotas, admins another's.
"""

from __future__ import annotations

import itertools

from oslo_policy import policy

from fleetcache.api.policies import (
    aggregate_images,
    aggregates,
    availability_zones,
    base,
    extensions,
    flavor_access,
    flavors,
    host_image_cache,
    hypervisors,
    images,
    limits,
    networks,
    quota_sets,
    server_metadata,
    servers,
    services,
    status,
)


def list_rules() -> list[policy.RuleDefault]:
    return list(
        itertools.chain(
            base.list_rules(),
            aggregates.list_rules(),
            aggregate_images.list_rules(),
            images.list_rules(),
            services.list_rules(),
            host_image_cache.list_rules(),
            status.list_rules(),
            flavors.list_rules(),
            flavor_access.list_rules(),
            servers.list_rules(),
            server_metadata.list_rules(),
            networks.list_rules(),
            hypervisors.list_rules(),
            availability_zones.list_rules(),
            extensions.list_rules(),
            limits.list_rules(),
            quota_sets.list_rules(),
        )
    )
