"""What host filters and weighers get besides the host: the request and this request's view
of the aggregates, with the image properties worked out once rather than once per host."""

from __future__ import annotations

import dataclasses
import datetime
import functools
from collections.abc import Mapping
from typing import Any

from fleetcache.common.db.models import utcnow
from fleetcache.conductor.scheduler.aggregates import AggregateCatalog
from fleetcache.conductor.scheduler.spec import RequestSpec


@dataclasses.dataclass(frozen=True)
class FilterRequest:
    spec: RequestSpec
    catalog: AggregateCatalog
    image_props: Mapping[str, Any]

    @functools.cached_property
    def now(self) -> datetime.datetime:
        """One clock reading for the whole request (whether a service is up)."""
        return utcnow()

    @functools.cached_property
    def isolation_closed(self) -> frozenset[str]:
        """The strict isolation aggregates that do not take this image."""
        return frozenset(self.catalog.isolation_closed(self.image_props))

    @functools.cached_property
    def isolation_required(self) -> dict[str, set[str]]:
        """``{isolating property the image carries: {aggregates naming it}}``."""
        return self.catalog.isolation_required(self.image_props)

    @classmethod
    def of(cls, spec: RequestSpec, catalog: AggregateCatalog) -> FilterRequest:
        return cls(spec, catalog, spec.image_properties)
