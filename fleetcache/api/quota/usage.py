"""A project's usage and a request's deltas, by unified limit name.

Both come from :func:`~fleetcache.common.flavor_resources.resource_amounts`, the rule the
scheduler claims Placement resources with, so that a project's ``class:VCPU`` usage is the
sum of what its servers hold (or will hold once placed) in Placement. Every instance that is
not deleted counts, as in Nova's database counting: one still building, and one in ERROR.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleetcache.api.quota import resources
from fleetcache.common.db import usage as db_usage
from fleetcache.common.db.session import Database
from fleetcache.common.flavor_resources import resource_amounts


def per_server(flavor: Mapping[str, Any]) -> dict[str, int]:
    """What one server of ``flavor`` (a flavor's fields, or an instance's snapshot of them)
    takes: ``{"class:VCPU": 2, "class:MEMORY_MB": 512, ...}`` (``servers`` not included)."""
    amounts = resource_amounts(int(flavor.get("vcpus") or 0), int(flavor.get("memory_mb") or 0),
                               int(flavor.get("root_gb") or 0),
                               dict(flavor.get("extra_specs") or {}))
    return {resources.resource_class_name(rc): n for rc, n in amounts.items()}


def deltas(amounts: Mapping[str, int], count: int) -> dict[str, int]:
    """What ``count`` servers of ``amounts`` (:func:`per_server`) add: Nova's deltas
    (``servers`` always, a class only when the servers take some)."""
    return {resources.SERVERS: count, **{name: n * count for name, n in amounts.items()}}


def total(flavors: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``servers`` and each class the servers of ``flavors`` (one item a server) take."""
    used: dict[str, int] = {resources.SERVERS: 0}
    for flavor in flavors:
        used[resources.SERVERS] += 1
        for name, n in per_server(flavor).items():
            used[name] = used.get(name, 0) + n
    return used


def project_usage(db: Database, project_id: str | None) -> dict[str, int]:
    """What the project's servers take now (:func:`total` of them)."""
    return total(db_usage.project_flavors(db, project_id))
