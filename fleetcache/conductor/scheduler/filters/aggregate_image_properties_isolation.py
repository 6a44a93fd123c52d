"""AggregateImagePropertiesIsolation, with Nova's semantics (Nova's
``aggregate_image_properties_isolation.py``), one-way gap included.

For every metadata key of the host's aggregates (union over aggregates, values split on
commas): when the image sets that property, its value (as a string) must be one of the
key's values. An image that does **not** set the property passes: a host in an aggregate with
``k=v`` also takes every image without ``k`` (Nova bug 1677217; AggregateImageStrictIsolation
is the two-way rule). A host in no aggregate passes.

``[filter_scheduler] aggregate_image_properties_isolation_namespace`` limits the keys checked
to those starting with ``<namespace><separator>``. One difference from Nova: any image
property can match, not only the fields of Nova's ``ImageMetaProps`` (Nova ignores, with a
warning per host and key, every key that is not one), so the seed's ``trove=true`` works as
the operator expected.
"""

from __future__ import annotations

from oslo_config import cfg

from fleetcache.conductor.scheduler.filters.base import BaseHostFilter
from fleetcache.conductor.scheduler.host_state import HostState
from fleetcache.conductor.scheduler.request import FilterRequest


class AggregateImagePropertiesIsolation(BaseHostFilter):
    def __init__(self, conf: cfg.ConfigOpts) -> None:
        super().__init__(conf)
        group = conf.filter_scheduler
        namespace = group.aggregate_image_properties_isolation_namespace
        self.prefix = (namespace + group.aggregate_image_properties_isolation_separator
                       if namespace else "")

    def host_fails(self, host: HostState, request: FilterRequest) -> str | None:
        for key, options in host.metadata.items():
            if not key.startswith(self.prefix):
                continue
            prop = request.image_props.get(key)
            if prop and str(prop) not in options:
                return (f"image property {key}={prop} is not one of the aggregate values "
                        f"{', '.join(sorted(options))}")
        return None
