"""Request filters: each turns part of a request into the one Placement query
(:class:`~fleetcache.conductor.scheduler.query.CandidateQuery`), so that Placement, not Python,
drops the hosts that cannot match (Nova's ``nova/scheduler/request_filter.py`` idea).

A request filter is a callable ``(spec, query, catalog) -> bool`` (True: it changed the query);
:func:`get_request_filters` lists the ones the configuration enables, in order. The image-type
rule is also :func:`image_type_trait`, which the pre-cache job uses to mark a host that cannot
use an image ``unsupported``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from oslo_config import cfg

from fleetcache.common.flavor_resources import resource_amounts
from fleetcache.conductor.placement.provider import (
    IMAGE_TYPE_TRAIT,
    KNOWN_IMAGE_TYPE_TRAITS,
    provider_uuid,
)
from fleetcache.conductor.scheduler.aggregates import (
    FORBIDDEN,
    REQUIRED,
    TRAIT_PREFIX,
    AggregateCatalog,
)
from fleetcache.conductor.scheduler.query import CandidateQuery
from fleetcache.conductor.scheduler.spec import RequestSpec

LOG = logging.getLogger(__name__)

RequestFilter = Callable[[RequestSpec, CandidateQuery, AggregateCatalog], bool]

#: The host filter whose rules :func:`isolate_strict_image_aggregates` pushes down.
STRICT_ISOLATION_FILTER = "AggregateImageStrictIsolation"


def image_type_trait(image: Mapping[str, Any]) -> str | None:
    """``COMPUTE_IMAGE_TYPE_<FMT>`` of the image's ``disk_format``; ``None`` when it has none
    or os-traits names no such trait (Nova then does not filter, and logs an error)."""
    disk_format = image.get("disk_format")
    if not disk_format:
        return None
    trait = IMAGE_TYPE_TRAIT + str(disk_format).upper()
    if trait not in KNOWN_IMAGE_TYPE_TRAITS:
        LOG.error("Image %s has disk_format %r, which has no image type trait: not "
                  "filtering hosts by image type", image.get("id"), disk_format)
        return None
    return trait


def request_traits(spec: RequestSpec) -> tuple[set[str], set[str]]:
    """``(required, forbidden)`` traits of the flavor's and the image's ``trait:<T>`` keys
    (the image's only ``required``, as in Nova)."""
    required: set[str] = set()
    forbidden: set[str] = set()
    for key, value in spec.flavor.extra_specs.items():
        if key.startswith(TRAIT_PREFIX):
            if value == REQUIRED:
                required.add(key[len(TRAIT_PREFIX):])
            elif value == FORBIDDEN:
                forbidden.add(key[len(TRAIT_PREFIX):])
    for key, value in spec.image_properties.items():
        if key.startswith(TRAIT_PREFIX) and value == REQUIRED:
            required.add(key[len(TRAIT_PREFIX):])
    return required, forbidden


def flavor_resources(spec: RequestSpec, query: CandidateQuery, _: AggregateCatalog) -> bool:
    """VCPU, MEMORY_MB and DISK_GB of the flavor; ``resources:<RC>=<N>`` extra specs override
    them (``0`` drops a class), as in Nova (:func:`~fleetcache.common.flavor_resources.
    resource_amounts`, the rule the API's quota counts with too)."""
    flavor = spec.flavor
    query.resources.update(resource_amounts(flavor.vcpus, flavor.memory_mb, flavor.root_gb,
                                            flavor.extra_specs))
    return True


def require_image_type_support(
    spec: RequestSpec, query: CandidateQuery, _: AggregateCatalog
) -> bool:
    """The image's format trait is required (``[scheduler]
    filter_hosts_by_image_type_support``; seed 000)."""
    trait = image_type_trait(spec.image)
    if trait is None:
        return False
    query.required.add(trait)
    LOG.debug("Request filter image type: requiring %s", trait)
    return True


def required_traits(spec: RequestSpec, query: CandidateQuery, _: AggregateCatalog) -> bool:
    """``trait:<T>=required|forbidden`` of the flavor, ``trait:<T>=required`` of the image."""
    required, forbidden = request_traits(spec)
    query.required |= required
    query.forbidden |= forbidden
    return bool(required or forbidden)


def availability_zone_to_aggregates(default_zone: str) -> RequestFilter:
    """The requested availability zone as aggregates (Nova's
    ``map_az_to_placement_aggregate``): ``in:`` the aggregates of that zone; for the default
    zone, ``!in:`` every aggregate of another zone (a host in no zone aggregate is in the
    default one). A zone no aggregate has, other than the default, matches no host."""

    def availability_zone(
        spec: RequestSpec, query: CandidateQuery, catalog: AggregateCatalog
    ) -> bool:
        zone = spec.availability_zone
        if not zone:
            return False
        zones = catalog.availability_zones()
        if zone == default_zone:
            query.not_member_of |= {agg for agg, z in zones.items() if z != zone}
            return True
        matching = {agg for agg, z in zones.items() if z == zone}
        if not matching:
            query.impossible = f"availability zone {zone} has no host"
        else:
            query.require_member_of(matching)
        return True

    return availability_zone


def isolate_strict_image_aggregates(
    spec: RequestSpec, query: CandidateQuery, catalog: AggregateCatalog
) -> bool:
    """AggregateImageStrictIsolation pushed down, exactly: out of every isolation aggregate
    that does not take the image; into an aggregate naming each isolating property the image
    carries."""
    if not catalog.isolation:
        return False
    props = spec.image_properties
    query.not_member_of |= catalog.isolation_closed(props)
    for _prop, aggregates in catalog.isolation_required(props).items():
        query.require_member_of(aggregates)
    return True


def isolate_trait_aggregates(
    spec: RequestSpec, query: CandidateQuery, catalog: AggregateCatalog
) -> bool:
    """Nova's isolated aggregates (``[scheduler] enable_isolated_aggregate_filtering``): out of
    every aggregate with ``trait:<T>=required`` metadata unless the flavor or image requires
    all of its traits."""
    required, _forbidden = request_traits(spec)
    isolated = {agg for agg, traits in catalog.required_traits().items()
                if not traits <= required}
    query.not_member_of |= isolated
    return bool(isolated)


def destination_host(spec: RequestSpec, query: CandidateQuery, _: AggregateCatalog) -> bool:
    """The admin's ``zone:host`` (``force_host``) or a rebuild's own host
    (``requested_destination``): only that host's provider tree."""
    host = spec.force_host or spec.requested_destination
    if not host:
        return False
    query.in_tree = provider_uuid(host)
    return True


def get_request_filters(conf: cfg.ConfigOpts) -> list[RequestFilter]:
    """The request filters ``conf`` enables, in the order they run."""
    filters: list[RequestFilter] = [flavor_resources, required_traits]
    if conf.scheduler.filter_hosts_by_image_type_support:
        filters.append(require_image_type_support)
    filters.append(availability_zone_to_aggregates(conf.default_availability_zone))
    if STRICT_ISOLATION_FILTER in conf.filter_scheduler.enabled_filters:
        filters.append(isolate_strict_image_aggregates)
    if conf.scheduler.enable_isolated_aggregate_filtering:
        filters.append(isolate_trait_aggregates)
    filters.append(destination_host)
    return filters


def build_query(
    filters: list[RequestFilter], spec: RequestSpec, catalog: AggregateCatalog, limit: int
) -> CandidateQuery:
    """Run ``filters`` over an empty query with ``limit``."""
    query = CandidateQuery(limit=limit)
    for request_filter in filters:
        request_filter(spec, query, catalog)
    return query
