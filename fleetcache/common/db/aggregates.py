"""Queries of host aggregates (tables ``aggregates``, ``aggregate_hosts``, ``aggregate_metadata``).

An aggregate's availability zone is its metadata key :data:`AZ_KEY`, as in Nova. Every function
takes the :class:`~fleetcache.common.db.session.Database` first, runs one transaction and
returns plain dicts, so nothing lazy escapes a session.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any, TypedDict

from oslo_utils import uuidutils
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, lazyload

from fleetcache.common import binaries, exception
from fleetcache.common.db import models
from fleetcache.common.db.session import Database

AZ_KEY = "availability_zone"


class AggregateDict(TypedDict):
    id: int
    uuid: str
    name: str
    availability_zone: str | None
    hosts: list[str]
    metadata: dict[str, str]
    created_at: datetime.datetime
    updated_at: datetime.datetime | None


def _aggregate_dict(agg: models.Aggregate, hosts: list[str] | None = None) -> AggregateDict:
    """:param hosts: the aggregate's host names as read by :func:`_aggregate_read`; default
        its loaded host rows."""
    metadata = {m.key: m.value for m in agg.metadata_items}
    return AggregateDict(
        id=agg.id,
        uuid=agg.uuid,
        name=agg.name,
        availability_zone=metadata.get(AZ_KEY),
        hosts=hosts if hosts is not None else [h.host for h in agg.hosts],
        metadata=metadata,
        created_at=agg.created_at,
        updated_at=agg.updated_at,
    )


def _aggregate_lookup(session: Session, aggregate_id: int) -> models.Aggregate:
    agg = session.get(models.Aggregate, aggregate_id)
    if agg is None:
        raise exception.AggregateNotFound(aggregate_id=aggregate_id)
    return agg


def _name_taken(session: Session, name: str, exclude_id: int | None = None) -> bool:
    query = select(models.Aggregate.id).where(models.Aggregate.name == name)
    if exclude_id is not None:
        query = query.where(models.Aggregate.id != exclude_id)
    return session.scalars(query).first() is not None


def aggregate_create(
    db: Database,
    name: str,
    availability_zone: str | None = None,
    metadata: dict[str, str] | None = None,
) -> AggregateDict:
    """:raises AggregateNameExists:"""
    try:
        with db.transaction() as session:
            if _name_taken(session, name):
                raise exception.AggregateNameExists(name=name)
            agg = models.Aggregate(uuid=uuidutils.generate_uuid(), name=name)
            items = dict(metadata or {})
            if availability_zone is not None:
                items[AZ_KEY] = availability_zone
            agg.metadata_items = [
                models.AggregateMetadata(key=k, value=v) for k, v in items.items()
            ]
            session.add(agg)
            session.flush()
            return _aggregate_dict(agg)
    except IntegrityError as exc:  # a concurrent create won the race
        raise exception.AggregateNameExists(name=name) from exc


def _aggregate_read(session: Session, where: Any, ident: int | str) -> AggregateDict:
    """An aggregate to read, not change: its host names in one narrow query, no host rows.

    NOTE: loading the host relationship built one ORM object per host to read its name, a
    peak at a pre-cache job's start several times what the names alone hold
    (``bench/conductor_memory.py --trace``, docs/performance.md, "What a pre-cache job holds
    per host").

    :raises AggregateNotFound:
    """
    agg = session.scalars(select(models.Aggregate).where(where)
                          .options(lazyload(models.Aggregate.hosts))).first()
    if agg is None:
        raise exception.AggregateNotFound(aggregate_id=ident)
    host = models.AggregateHost
    hosts = list(session.scalars(select(host.host).where(host.aggregate_id == agg.id)
                                 .order_by(host.id)))
    return _aggregate_dict(agg, hosts)


def aggregate_get(db: Database, aggregate_id: int) -> AggregateDict:
    """:raises AggregateNotFound:"""
    with db.transaction() as session:
        return _aggregate_read(session, models.Aggregate.id == aggregate_id, aggregate_id)


def aggregate_get_by_uuid(db: Database, uuid: str) -> AggregateDict:
    """:raises AggregateNotFound:"""
    with db.transaction() as session:
        return _aggregate_read(session, models.Aggregate.uuid == uuid, uuid)


def aggregate_list(db: Database) -> list[AggregateDict]:
    with db.transaction() as session:
        aggs = session.scalars(select(models.Aggregate).order_by(models.Aggregate.id))
        return [_aggregate_dict(a) for a in aggs]


def aggregate_names(db: Database, uuids: Iterable[str]) -> dict[str, str]:
    """``{uuid: name}`` of the aggregates of ``uuids`` that exist, in one narrow query (no
    host or metadata rows); a deleted aggregate is left out."""
    wanted = list(dict.fromkeys(uuids))
    if not wanted:
        return {}
    with db.transaction() as session:
        rows = session.execute(select(models.Aggregate.uuid, models.Aggregate.name)
                               .where(models.Aggregate.uuid.in_(wanted)))
        return {uuid: name for uuid, name in rows}


def aggregate_update(
    db: Database,
    aggregate_id: int,
    name: str | None = None,
    availability_zone: str | None = None,
) -> AggregateDict:
    """Rename an aggregate or change its zone. :raises AggregateNameExists, AggregateNotFound:"""
    try:
        with db.transaction() as session:
            agg = _aggregate_lookup(session, aggregate_id)
            if name is not None and name != agg.name:
                if _name_taken(session, name, exclude_id=agg.id):
                    raise exception.AggregateNameExists(name=name)
                agg.name = name
            if availability_zone is not None:
                _set_metadata(session, agg, {AZ_KEY: availability_zone})
            agg.updated_at = models.utcnow()
            session.flush()
            return _aggregate_dict(agg)
    except IntegrityError as exc:
        raise exception.AggregateNameExists(name=name) from exc


def aggregate_delete(db: Database, aggregate_id: int) -> None:
    """:raises AggregateNotEmpty: while the aggregate has hosts (as Nova)."""
    with db.transaction() as session:
        agg = _aggregate_lookup(session, aggregate_id)
        if agg.hosts:
            raise exception.AggregateNotEmpty(
                aggregate_id=aggregate_id, hosts=", ".join(h.host for h in agg.hosts)
            )
        session.delete(agg)


def aggregate_add_host(db: Database, aggregate_id: int, host: str) -> AggregateDict:
    """Add a compute host. :raises ComputeHostNotFound, AggregateHostExists, AggregateNotFound:"""
    with db.transaction() as session:
        agg = _aggregate_lookup(session, aggregate_id)
        known = session.scalars(
            select(models.Service.host).where(
                models.Service.host == host, models.Service.binary == binaries.COMPUTE
            )
        ).all()
        # NOTE: MariaDB's utf8mb4_general_ci matches "Compute1" to "compute1"; the aggregate
        # then named a host no Placement provider or host lookup knows by that spelling.
        if host not in known:
            raise exception.ComputeHostNotFound(host=host)
        if any(h.host == host for h in agg.hosts):
            raise exception.AggregateHostExists(aggregate_id=aggregate_id, host=host)
        agg.hosts.append(models.AggregateHost(host=host))
        agg.updated_at = models.utcnow()
        session.flush()
        return _aggregate_dict(agg)


def aggregate_remove_host(db: Database, aggregate_id: int, host: str) -> AggregateDict:
    """:raises AggregateHostNotFound, AggregateNotFound:"""
    with db.transaction() as session:
        agg = _aggregate_lookup(session, aggregate_id)
        entry = next((h for h in agg.hosts if h.host == host), None)
        if entry is None:
            raise exception.AggregateHostNotFound(aggregate_id=aggregate_id, host=host)
        agg.hosts.remove(entry)
        agg.updated_at = models.utcnow()
        session.flush()
        return _aggregate_dict(agg)


def _set_metadata(session: Session, agg: models.Aggregate, metadata: dict[str, str | None]) -> None:
    """:raises AggregateMetadataKeyCase: a new key differs from another only in case."""
    current = {m.key: m for m in agg.metadata_items}
    folded = {k.casefold(): k for k in current}
    for key, value in metadata.items():
        item = current.get(key)
        other = folded.get(key.casefold())
        if value is not None and item is None and other is not None:
            # One answer on every backend: MariaDB's case-insensitive collation would refuse
            # the row with an IntegrityError, PostgreSQL and SQLite would keep both keys.
            raise exception.AggregateMetadataKeyCase(key=key, existing=other)
        if value is not None:
            folded[key.casefold()] = key
        if value is None:
            if item is not None:
                agg.metadata_items.remove(item)
        elif item is None:
            agg.metadata_items.append(models.AggregateMetadata(key=key, value=value))
        else:
            item.value = value


def aggregate_set_metadata(
    db: Database, aggregate_id: int, metadata: dict[str, str | None]
) -> AggregateDict:
    """Set keys; a ``None`` value deletes the key (as Nova). :raises AggregateNotFound:"""
    with db.transaction() as session:
        agg = _aggregate_lookup(session, aggregate_id)
        _set_metadata(session, agg, metadata)
        agg.updated_at = models.utcnow()
        session.flush()
        return _aggregate_dict(agg)


def aggregate_uuids_by_host(
    db: Database, hosts: Iterable[str] | None = None
) -> dict[str, set[str]]:
    """``{host: {aggregate uuid, ...}}`` for ``hosts`` (default: every host in an aggregate),
    in one query; a host in no aggregate maps to an empty set when asked for."""
    wanted = None if hosts is None else list(hosts)
    result: dict[str, set[str]] = {h: set() for h in wanted or ()}
    with db.transaction() as session:
        query = select(models.AggregateHost.host, models.Aggregate.uuid).join(
            models.Aggregate, models.Aggregate.id == models.AggregateHost.aggregate_id)
        if wanted is not None:
            query = query.where(models.AggregateHost.host.in_(wanted))
        for host, agg_uuid in session.execute(query):
            result.setdefault(host, set()).add(agg_uuid)
    return result
