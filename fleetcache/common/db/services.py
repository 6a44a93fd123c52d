"""Queries of services (table ``services``): the records of running daemons, by host and binary.

Every function takes the :class:`~fleetcache.common.db.session.Database` first, runs one
transaction and returns plain dicts, so nothing lazy escapes a session and results can go
straight into an RPC message or a JSON body.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any, TypedDict

from oslo_utils import uuidutils
from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetcache.common import binaries, exception
from fleetcache.common.db import cells, models
from fleetcache.common.db.cells import CellDict
from fleetcache.common.db.session import Database


class ServiceDict(TypedDict):
    id: int
    uuid: str
    host: str
    binary: str
    topic: str
    cell: CellDict | None
    disabled: bool
    disabled_reason: str | None
    forced_down: bool
    last_seen_up: datetime.datetime | None
    report_count: int
    capabilities: dict[str, Any]
    placement_synced_at: datetime.datetime | None
    #: The address the service reported when it registered (a compute's ``my_ip``), or None.
    host_ip: str | None
    created_at: datetime.datetime
    updated_at: datetime.datetime | None


def _service_dict(svc: models.Service) -> ServiceDict:
    return ServiceDict(
        id=svc.id,
        uuid=svc.uuid,
        host=svc.host,
        binary=svc.binary,
        topic=svc.topic,
        cell=cells.cell_dict(svc.cell) if svc.cell is not None else None,
        disabled=svc.disabled,
        disabled_reason=svc.disabled_reason,
        forced_down=svc.forced_down,
        last_seen_up=svc.last_seen_up,
        report_count=svc.report_count,
        capabilities=dict(svc.capabilities or {}),
        placement_synced_at=svc.placement_synced_at,
        host_ip=svc.host_ip,
        created_at=svc.created_at,
        updated_at=svc.updated_at,
    )


def service_register(
    db: Database,
    host: str,
    binary: str,
    topic: str,
    cell_id: int | None,
    capabilities: dict[str, Any] | None = None,
    host_ip: str | None = None,
) -> ServiceDict:
    """Create or refresh the record of a starting service and count it as seen now.

    Its Placement provider counts as out of step until the conductor has written these
    capabilities (:func:`service_placement_synced`).

    :param host_ip: the address the service reports (a compute's ``[DEFAULT] my_ip``);
        ``None`` for a service that reports none, which clears an address recorded before.
    """
    with db.transaction() as session:
        svc = session.scalars(
            select(models.Service).where(
                models.Service.host == host, models.Service.binary == binary
            )
        ).first()
        if svc is None:
            svc = models.Service(
                uuid=uuidutils.generate_uuid(), host=host, binary=binary, report_count=0
            )
            session.add(svc)
        svc.topic = topic
        svc.cell_id = cell_id
        svc.capabilities = dict(capabilities or {})
        svc.host_ip = host_ip
        svc.placement_synced_at = None
        svc.last_seen_up = models.utcnow()
        svc.report_count = (svc.report_count or 0) + 1
        session.flush()
        session.refresh(svc)
        return _service_dict(svc)


def service_heartbeat(
    db: Database, host: str, binary: str, capabilities: dict[str, Any] | None = None
) -> ServiceDict:
    """Record that a service is alive. :raises ComputeHostNotFound: if it never registered."""
    with db.transaction() as session:
        svc = _service_lookup(session, host, binary)
        svc.last_seen_up = models.utcnow()
        svc.report_count = (svc.report_count or 0) + 1
        if capabilities is not None:
            svc.capabilities = dict(capabilities)
        session.flush()
        return _service_dict(svc)


def service_placement_synced(
    db: Database, host: str, binary: str, capabilities: dict[str, Any]
) -> bool:
    """Record that ``host``'s Placement provider now holds ``capabilities``.

    :returns: False (nothing recorded) when the service registered again meanwhile with other
        capabilities, or is gone: the newer registration gets its own synchronisation.
    """
    with db.transaction() as session:
        svc = session.scalars(
            select(models.Service).where(
                models.Service.host == host, models.Service.binary == binary)
        ).first()
        if svc is None or dict(svc.capabilities or {}) != capabilities:
            return False
        svc.placement_synced_at = models.utcnow()
        return True


def _service_lookup(session: Session, host: str, binary: str) -> models.Service:
    svc = session.scalars(
        select(models.Service).where(models.Service.host == host, models.Service.binary == binary)
    ).first()
    if svc is None:
        raise exception.ComputeHostNotFound(host=host)
    return svc


def service_get(db: Database, host: str, binary: str) -> ServiceDict:
    with db.transaction() as session:
        return _service_dict(_service_lookup(session, host, binary))


def service_list(
    db: Database, binary: str | None = None, hosts: Iterable[str] | None = None
) -> list[ServiceDict]:
    """All services, or those of ``binary`` on ``hosts``: one query however many hosts."""
    with db.transaction() as session:
        query = select(models.Service).order_by(models.Service.id)
        if binary is not None:
            query = query.where(models.Service.binary == binary)
        if hosts is not None:
            query = query.where(models.Service.host.in_(list(hosts)))
        return [_service_dict(s) for s in session.scalars(query)]


def service_update(db: Database, service_id: int, **values: Any) -> ServiceDict:
    """Set ``disabled``, ``disabled_reason`` or ``forced_down`` of a service."""
    allowed = {"disabled", "disabled_reason", "forced_down"}
    unknown = set(values) - allowed
    if unknown:
        raise exception.InvalidInput(reason=f"cannot update service fields {sorted(unknown)}")
    with db.transaction() as session:
        svc = session.get(models.Service, service_id)
        if svc is None:
            raise exception.NotFound(f"Service {service_id} could not be found.")
        for key, value in values.items():
            setattr(svc, key, value)
        session.flush()
        return _service_dict(svc)


def compute_hosts(db: Database) -> list[str]:
    """The host names of every compute service, in one narrow query (no rows built)."""
    with db.transaction() as session:
        return list(session.scalars(
            select(models.Service.host).where(models.Service.binary == binaries.COMPUTE)))


def service_find(db: Database, binary: str, ident: int | str) -> ServiceDict | None:
    """The ``binary`` service whose integer id (an int) or uuid (a str) is ``ident``, or None."""
    column = models.Service.id if isinstance(ident, int) else models.Service.uuid
    with db.transaction() as session:
        svc = session.scalars(select(models.Service).where(
            column == ident, models.Service.binary == binary)).first()
        return None if svc is None else _service_dict(svc)
