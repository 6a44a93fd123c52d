"""The narrow queries the scheduler makes per request: every aggregate's metadata (read per
request, so an operator's change counts from the next request, without a restart) and the
status of the candidate hosts' compute services.

They select plain columns rather than ORM rows: for 1,000 candidate hosts of 10,000 on SQLite,
``services.service_list`` (ORM rows with their cell joined, turned into ``ServiceDict``) took
several times as long as :func:`compute_status`, measured side by side (docs/performance.md,
"Scheduling at 10,000 hosts").
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import TypedDict

from sqlalchemy import func, select

from fleetcache.common import binaries
from fleetcache.common.db import models
from fleetcache.common.db.session import Database


class ComputeStatus(TypedDict):
    """What the scheduler needs of a compute service (the keys ``servicegroup`` reads)."""

    host: str
    cell_id: int | None
    disabled: bool
    disabled_reason: str | None
    forced_down: bool
    last_seen_up: datetime.datetime | None


def metadata_by_aggregate(db: Database) -> dict[str, dict[str, str]]:
    """``{aggregate uuid: {key: value}}`` of every aggregate that has metadata (an aggregate
    without any is absent: no filter can tell it from no aggregate)."""
    result: dict[str, dict[str, str]] = {}
    with db.transaction() as session:
        query = select(models.Aggregate.uuid, models.AggregateMetadata.key,
                       models.AggregateMetadata.value).join(
            models.AggregateMetadata,
            models.AggregateMetadata.aggregate_id == models.Aggregate.id)
        for agg_uuid, key, value in session.execute(query):
            result.setdefault(agg_uuid, {})[key] = value
    return result


def compute_status(
    db: Database, hosts: Iterable[str]
) -> tuple[dict[str, ComputeStatus], dict[str, set[str]]]:
    """The status of the compute services on ``hosts`` and the aggregates (uuids) each is in,
    in one query (services left-joined to their aggregates).

    :returns: ``({host: status}, {host: {aggregate uuid, ...}})``; a host without a compute
        service is in neither.
    """
    service = models.Service
    query = select(service.host, service.cell_id, service.disabled, service.disabled_reason,
                   service.forced_down, service.last_seen_up, models.Aggregate.uuid).outerjoin(
        models.AggregateHost, models.AggregateHost.host == service.host).outerjoin(
        models.Aggregate, models.Aggregate.id == models.AggregateHost.aggregate_id).where(
        service.binary == binaries.COMPUTE, service.host.in_(list(hosts)))
    status: dict[str, ComputeStatus] = {}
    aggregates: dict[str, set[str]] = {}
    with db.transaction() as session:
        for host, cell_id, disabled, reason, forced, seen, agg in session.execute(query):
            if host not in status:
                status[host] = ComputeStatus(
                    host=host, cell_id=cell_id, disabled=bool(disabled),
                    disabled_reason=reason, forced_down=bool(forced), last_seen_up=seen)
                aggregates[host] = set()
            if agg is not None:
                aggregates[host].add(agg)
    return status, aggregates


def compute_hosts_version(db: Database) -> tuple[int, int]:
    """``(count, highest id)`` of the compute services: changes whenever one registers anew
    or is deleted, so a cache of host names knows when to rebuild (one cheap query)."""
    with db.transaction() as session:
        count, highest = session.execute(
            select(func.count(models.Service.id), func.max(models.Service.id)).where(
                models.Service.binary == binaries.COMPUTE)).one()
    return int(count), int(highest or 0)
