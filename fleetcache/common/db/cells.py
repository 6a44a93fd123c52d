"""Queries of cells (table ``cells``): each cell's name and the transport its computes use.

Every function takes the :class:`~fleetcache.common.db.session.Database` first, runs one
transaction and returns plain dicts, so nothing lazy escapes a session.
"""

from __future__ import annotations

from typing import TypedDict

from oslo_utils import uuidutils
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from fleetcache.common import exception
from fleetcache.common.db import models
from fleetcache.common.db.session import Database


class CellDict(TypedDict):
    id: int
    uuid: str
    name: str
    transport_url: str


def cell_dict(cell: models.Cell) -> CellDict:
    """A cell row as a plain dict; also how a service's cell is shown (:mod:`.services`)."""
    return CellDict(id=cell.id, uuid=cell.uuid, name=cell.name, transport_url=cell.transport_url)


def cell_create(db: Database, name: str, transport_url: str) -> CellDict:
    """:raises CellExists: when a cell has that name already."""
    try:
        with db.transaction() as session:
            cell = models.Cell(
                uuid=uuidutils.generate_uuid(), name=name, transport_url=transport_url
            )
            session.add(cell)
            session.flush()
            return cell_dict(cell)
    except IntegrityError as exc:
        raise exception.CellExists(name=name) from exc


def cell_list(db: Database) -> list[CellDict]:
    with db.transaction() as session:
        cells = session.scalars(select(models.Cell).order_by(models.Cell.id))
        return [cell_dict(c) for c in cells]


def _cell_lookup(session: Session, ident: str) -> models.Cell:
    cell = session.scalars(
        select(models.Cell).where((models.Cell.name == ident) | (models.Cell.uuid == ident))
    ).first()
    if cell is None:
        raise exception.CellNotFound(cell=ident)
    return cell


def cell_update(
    db: Database, ident: str, name: str | None = None, transport_url: str | None = None
) -> CellDict:
    with db.transaction() as session:
        cell = _cell_lookup(session, ident)
        if name is not None:
            cell.name = name
        if transport_url is not None:
            cell.transport_url = transport_url
        session.flush()
        return cell_dict(cell)


def cell_delete(db: Database, ident: str) -> None:
    """:raises Conflict: while services are still mapped to the cell."""
    with db.transaction() as session:
        cell = _cell_lookup(session, ident)
        hosts = session.scalars(
            select(models.Service.host).where(models.Service.cell_id == cell.id)
        ).all()
        if hosts:
            raise exception.Conflict(
                reason=f"cell {cell.name} still has services on hosts {', '.join(hosts)}"
            )
        session.delete(cell)
