"""Aggregate metadata as the scheduler reads it: every aggregate's metadata by uuid, in one
query per request, so that an operator's change to isolation metadata counts from the next
request on (no cache to go stale, no restart)."""

from __future__ import annotations

from sqlalchemy import select

from fleetcache.common.db import models
from fleetcache.common.db.session import Database


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
