"""The aggregates of one scheduling request: every aggregate's metadata, read from the database
once per request (so an operator's change counts from the next request, without a restart), and
what the isolation rules make of it. Request filters push these rules into the Placement query;
host filters apply them per host (:class:`~fleetcache.conductor.scheduler.host_state.HostState`
holds a host's aggregates)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.isolation import ISOLATION_KEY, isolated_properties, split_values

TRAIT_PREFIX = "trait:"
REQUIRED = "required"
FORBIDDEN = "forbidden"


def carries(image_props: Mapping[str, Any], prop: str) -> bool:
    """Whether an image carries ``prop``: set, to something other than an empty value."""
    return image_props.get(prop) not in (None, "")


class AggregateCatalog:
    """Every aggregate's metadata (``{uuid: {key: value}}``) and the rules read from it."""

    def __init__(self, metadata: Mapping[str, Mapping[str, str]]) -> None:
        self.metadata = metadata
        #: ``{uuid: {property, ...}}`` of the strict isolation aggregates.
        self.isolation: dict[str, set[str]] = {
            agg: isolated_properties(md[ISOLATION_KEY])
            for agg, md in metadata.items() if md.get(ISOLATION_KEY)
        }
        #: Every property some strict isolation aggregate names.
        self.isolating_props: set[str] = set().union(*self.isolation.values())

    def isolation_ok(self, aggregate: str, image_props: Mapping[str, Any]) -> bool:
        """Whether strict isolation aggregate ``aggregate`` takes an image with these
        properties (it carries one of the named ones)."""
        return any(carries(image_props, p) for p in self.isolation[aggregate])

    def isolation_closed(self, image_props: Mapping[str, Any]) -> set[str]:
        """The strict isolation aggregates that do not take this image."""
        return {agg for agg in self.isolation if not self.isolation_ok(agg, image_props)}

    def isolation_required(self, image_props: Mapping[str, Any]) -> dict[str, set[str]]:
        """``{property: {aggregates naming it}}`` for each isolating property the image
        carries: it must land in one of each set."""
        return {p: {agg for agg, props in self.isolation.items() if p in props}
                for p in sorted(self.isolating_props) if carries(image_props, p)}

    def availability_zones(self) -> dict[str, str]:
        """``{uuid: zone}`` of the aggregates that set one."""
        return {agg: md[db_aggregates.AZ_KEY] for agg, md in self.metadata.items()
                if md.get(db_aggregates.AZ_KEY)}

    def required_traits(self) -> dict[str, set[str]]:
        """``{uuid: {trait, ...}}`` of the aggregates with ``trait:<T>=required`` metadata
        (Nova's isolated aggregates)."""
        result: dict[str, set[str]] = {}
        for agg, md in self.metadata.items():
            traits = {k[len(TRAIT_PREFIX):] for k, v in md.items()
                      if k.startswith(TRAIT_PREFIX) and v == REQUIRED}
            if traits:
                result[agg] = traits
        return result

    def host_metadata(self, aggregates: Iterable[str]) -> dict[str, set[str]]:
        """The union of the metadata of ``aggregates``, each value split on commas (Nova's
        ``aggregate_metadata_get_by_host``)."""
        merged: dict[str, set[str]] = {}
        for agg in aggregates:
            for key, value in self.metadata.get(agg, {}).items():
                merged.setdefault(key, set()).update(split_values(value))
        return merged
