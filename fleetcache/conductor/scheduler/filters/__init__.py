"""Host filters, and how the enabled ones are found and loaded.

``[filter_scheduler] available_filters`` lists dotted paths: a filter class, or a function
returning filter classes, as Nova's. :func:`all_filters` (the default) returns fleetcache's
own, found through stevedore under the ``fleetcache.scheduler.filters`` entry point namespace,
so a filter shipped in another package joins by declaring an entry point there.
``[filter_scheduler] enabled_filters`` then picks classes by name; :func:`load_filters`
refuses an unknown name at start-up, naming the known ones.
"""

from __future__ import annotations

from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.conductor.scheduler import loadables
from fleetcache.conductor.scheduler.filters.base import BaseHostFilter

NAMESPACE = "fleetcache.scheduler.filters"

__all__ = ["NAMESPACE", "BaseHostFilter", "all_filters", "available_filters", "load_filters"]


def all_filters() -> list[type[BaseHostFilter]]:
    """Every filter class installed under :data:`NAMESPACE`."""
    return loadables.from_namespace(NAMESPACE)


def available_filters(conf: cfg.ConfigOpts) -> dict[str, type[BaseHostFilter]]:
    """``{class name: class}`` of ``[filter_scheduler] available_filters``."""
    return loadables.from_paths("[filter_scheduler] available_filters",
                                conf.filter_scheduler.available_filters, BaseHostFilter)


def load_filters(conf: cfg.ConfigOpts) -> list[BaseHostFilter]:
    """The enabled filters, built, in ``enabled_filters`` order.

    :raises InvalidConfiguration: an enabled name is not an available filter.
    """
    known = available_filters(conf)
    enabled = list(conf.filter_scheduler.enabled_filters)
    unknown = [name for name in enabled if name not in known]
    if unknown:
        names = ", ".join(sorted(known)) or (
            f"none (no {NAMESPACE} entry points: reinstall fleetcache, pip install -e .)")
        raise exception.InvalidConfiguration(
            reason=f"[filter_scheduler] enabled_filters: unknown filter(s) "
                   f"{', '.join(unknown)}; known: {names}")
    return [known[name](conf) for name in enabled]
