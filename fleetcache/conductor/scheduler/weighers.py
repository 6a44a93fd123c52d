"""Weighers: order the hosts that passed the filters, best first, as Nova does it: each
weigher's raw weights are normalised to 0..1 over the hosts (min-max; all equal gives 0), then
multiplied by the weigher's ``[filter_scheduler]`` multiplier and summed.

* :class:`CachedImageWeigher` (not Nova's): 1 for a host whose latest image cache report
  (``host_images``) holds the request's image. With its default multiplier above the others'
  sum, every such host comes before every host that would have to download the image.
* :class:`RAMWeigher`, :class:`DiskWeigher`: free MEMORY_MB and DISK_GB from Placement's
  provider summaries in the candidates response (capacity, after allocation ratio and
  reserved, minus used), so no extra query.

``[filter_scheduler] weight_classes`` names them as dotted paths; :func:`all_weighers` returns
those installed under the ``fleetcache.scheduler.weighers`` entry point namespace.
"""

from __future__ import annotations

from collections.abc import Sequence

from oslo_config import cfg

from fleetcache.common.db import host_images
from fleetcache.common.db.session import Database
from fleetcache.conductor.scheduler import loadables
from fleetcache.conductor.scheduler.host_state import HostState
from fleetcache.conductor.scheduler.request import FilterRequest

NAMESPACE = "fleetcache.scheduler.weighers"


class BaseWeigher:
    """A weigher: raw weights for all hosts at once (one query however many hosts)."""

    #: ``[filter_scheduler]`` option holding the multiplier.
    multiplier_option = ""

    def __init__(self, conf: cfg.ConfigOpts, db: Database) -> None:
        self.conf = conf
        self.db = db

    @property
    def multiplier(self) -> float:
        return float(getattr(self.conf.filter_scheduler, self.multiplier_option))

    def weights(self, hosts: Sequence[HostState], request: FilterRequest) -> list[float]:
        raise NotImplementedError


class RAMWeigher(BaseWeigher):
    multiplier_option = "ram_weight_multiplier"

    def weights(self, hosts: Sequence[HostState], request: FilterRequest) -> list[float]:
        return [h.free("MEMORY_MB") for h in hosts]


class DiskWeigher(BaseWeigher):
    multiplier_option = "disk_weight_multiplier"

    def weights(self, hosts: Sequence[HostState], request: FilterRequest) -> list[float]:
        return [h.free("DISK_GB") for h in hosts]


class CachedImageWeigher(BaseWeigher):
    multiplier_option = "cached_image_weight_multiplier"

    def weights(self, hosts: Sequence[HostState], request: FilterRequest) -> list[float]:
        image_id = request.spec.image_id
        if not image_id or not hosts:
            return [0.0] * len(hosts)
        holding = host_images.hosts_with_image(self.db, image_id, [h.host for h in hosts])
        return [1.0 if h.host in holding else 0.0 for h in hosts]


def all_weighers() -> list[type[BaseWeigher]]:
    """Every weigher class installed under :data:`NAMESPACE`."""
    return loadables.from_namespace(NAMESPACE)


def load_weighers(conf: cfg.ConfigOpts, db: Database) -> list[BaseWeigher]:
    """The weighers of ``[filter_scheduler] weight_classes``, built.

    :raises InvalidConfiguration:
    """
    classes = loadables.from_paths("[filter_scheduler] weight_classes",
                                   conf.filter_scheduler.weight_classes, BaseWeigher)
    return [cls(conf, db) for cls in classes.values()]


def normalise(weights: Sequence[float]) -> list[float]:
    """Min-max to 0..1, as Nova's ``nova.weights.normalize``; all equal: all 0."""
    if not weights:
        return []
    low, high = min(weights), max(weights)
    if high == low:
        return [0.0] * len(weights)
    return [(w - low) / (high - low) for w in weights]


def weigh(
    weighers: Sequence[BaseWeigher], hosts: Sequence[HostState], request: FilterRequest
) -> list[HostState]:
    """``hosts`` best first; ties keep their order (Placement's)."""
    totals = [0.0] * len(hosts)
    for weigher in weighers:
        multiplier = weigher.multiplier
        if not multiplier:
            continue
        for i, w in enumerate(normalise(weigher.weights(hosts, request))):
            totals[i] += multiplier * w
    order = sorted(range(len(hosts)), key=lambda i: -totals[i])
    return [hosts[i] for i in order]
