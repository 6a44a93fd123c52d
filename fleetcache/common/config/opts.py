"""Feeds ``oslo-config-generator`` (entry point ``oslo.config.opts``: ``fleetcache``)."""

from __future__ import annotations

from typing import Any

from fleetcache.common.config import (
    api,
    compute,
    compute_group,
    conductor,
    database,
    default,
    filter_scheduler,
    glance,
    image_cache,
    image_cache_peers,
    image_source,
    libvirt,
    metrics,
    placement,
    privsep,
    quota,
    resources,
    scheduler,
    upgrade_levels,
)

MODULES = (
    default,
    api,
    compute,
    compute_group,
    conductor,
    database,
    filter_scheduler,
    glance,
    image_cache,
    image_cache_peers,
    image_source,
    libvirt,
    metrics,
    placement,
    quota,
    resources,
    scheduler,
    upgrade_levels,
)


def list_opts() -> list[tuple[Any, list[Any]]]:
    """Every option fleetcache registers, grouped for the sample config file, and
    oslo.privsep's options of the compute's privileged context (:mod:`.privsep`: oslo.privsep
    registers those itself)."""
    merged: dict[str | None, tuple[Any, list[Any]]] = {}
    for module in MODULES:
        for group, opts in module.list_opts():
            name = getattr(group, "name", group)
            if name in merged:
                merged[name][1].extend(opts)
            else:
                merged[name] = (group, list(opts))
    return [*merged.values(), *privsep.list_opts()]
