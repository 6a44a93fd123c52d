"""AggregateImageStrictIsolation: two-way image isolation, configured by aggregate metadata
(seed 002's requirement "only Trove instances on Trove nodes", which
AggregateImagePropertiesIsolation cannot hold because images without the property leak in).

An aggregate with metadata ``image_isolation_property=<prop>[,<prop>...]`` is an isolation
aggregate:

* it takes only images that carry one of its properties (set to a non-empty value); a host in
  several isolation aggregates takes only images every one of them takes;
* an image that carries a property some isolation aggregate names goes only to hosts in an
  isolation aggregate naming it (for every such property it carries).

The metadata is read from the database per request, so an operator changes isolation with
``openstack aggregate set --property`` and no restart. The request filter
``isolate_strict_image_aggregates`` asks Placement for exactly these hosts (``member_of``), so
this filter normally removes nothing; it is the rule's statement and its per-host log.
"""

from __future__ import annotations

from fleetcache.conductor.scheduler.filters.base import BaseHostFilter
from fleetcache.conductor.scheduler.host_state import HostState
from fleetcache.conductor.scheduler.request import FilterRequest


class AggregateImageStrictIsolation(BaseHostFilter):
    def host_fails(self, host: HostState, request: FilterRequest) -> str | None:
        closed = host.aggregates & request.isolation_closed
        if closed:
            agg = min(closed)
            props = ", ".join(sorted(request.catalog.isolation[agg]))
            return f"isolation aggregate {agg} takes only images with property {props}"
        for prop, aggregates in request.isolation_required.items():
            if not host.aggregates & aggregates:
                return (f"image carries {prop}: only hosts of an aggregate with "
                        f"image_isolation_property={prop}")
        return None
