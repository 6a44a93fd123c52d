"""Queries of flavors, their extra specs and the projects they are shared with (tables
``flavors``, ``flavor_extra_specs``, ``flavor_projects``).

A flavor is known by its ``flavorid`` (the API's ``id``, a string); the integer ``id`` never
leaves this module. Every function runs one transaction and returns plain dicts.

As in Nova, a private flavor is seen by the projects it is shared with (flavor access) and by
admins; a public one by everybody. :func:`flavor_list` applies the project's side of that.
"""

from __future__ import annotations

import datetime
from typing import TypedDict

from oslo_utils import uuidutils
from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from fleetcache.common import exception
from fleetcache.common.db import models
from fleetcache.common.db.session import Database


class FlavorDict(TypedDict):
    flavorid: str
    name: str
    vcpus: int
    memory_mb: int
    root_gb: int
    ephemeral_gb: int
    swap: int
    is_public: bool
    description: str | None
    rxtx_factor: float
    extra_specs: dict[str, str]
    created_at: datetime.datetime
    updated_at: datetime.datetime | None


def _flavor_dict(flavor: models.Flavor) -> FlavorDict:
    return FlavorDict(
        flavorid=flavor.flavorid, name=flavor.name, vcpus=flavor.vcpus,
        memory_mb=flavor.memory_mb, root_gb=flavor.root_gb, ephemeral_gb=flavor.ephemeral_gb,
        swap=flavor.swap, is_public=flavor.is_public, description=flavor.description,
        rxtx_factor=flavor.rxtx_factor,
        extra_specs={spec.key: spec.value for spec in flavor.extra_specs},
        created_at=flavor.created_at, updated_at=flavor.updated_at,
    )


def _lookup(session: Session, flavorid: str) -> models.Flavor:
    flavor = session.scalars(
        select(models.Flavor).where(models.Flavor.flavorid == flavorid)).first()
    if flavor is None:
        raise exception.FlavorNotFound(flavor_id=flavorid)
    return flavor


def flavor_create(
    db: Database,
    name: str,
    vcpus: int,
    memory_mb: int,
    root_gb: int,
    flavorid: str | None = None,
    ephemeral_gb: int = 0,
    swap: int = 0,
    is_public: bool = True,
    description: str | None = None,
    rxtx_factor: float = 1.0,
) -> FlavorDict:
    """Create a flavor; without ``flavorid`` it gets a generated uuid, as in Nova.

    :raises FlavorExists: when a flavor has that name.
    :raises FlavorIdExists: when a flavor has that ``flavorid``.
    """
    flavorid = flavorid or uuidutils.generate_uuid()
    try:
        with db.transaction() as session:
            if session.scalars(select(models.Flavor.id).where(
                    models.Flavor.flavorid == flavorid)).first() is not None:
                raise exception.FlavorIdExists(flavor_id=flavorid)
            if session.scalars(select(models.Flavor.id).where(
                    models.Flavor.name == name)).first() is not None:
                raise exception.FlavorExists(name=name)
            flavor = models.Flavor(
                flavorid=flavorid, name=name, vcpus=vcpus, memory_mb=memory_mb,
                root_gb=root_gb, ephemeral_gb=ephemeral_gb, swap=swap, is_public=is_public,
                description=description, rxtx_factor=rxtx_factor,
            )
            session.add(flavor)
            session.flush()
            session.refresh(flavor)
            return _flavor_dict(flavor)
    except IntegrityError as exc:
        # A concurrent create of the same name or id won the race.
        raise exception.FlavorExists(name=name) from exc


def flavor_get(db: Database, flavorid: str) -> FlavorDict:
    """:raises FlavorNotFound:"""
    with db.transaction() as session:
        return _flavor_dict(_lookup(session, flavorid))


def flavor_list(db: Database, is_public: bool | None = None,
                project_id: str | None = None) -> list[FlavorDict]:
    """Flavors by internal id (creation order).

    :param is_public: only public (True) or private (False) flavors; ``None``: both.
    :param project_id: with ``is_public=True``, the private flavors shared with this project
        come too, as Nova's list gives them.
    """
    with db.transaction() as session:
        query = select(models.Flavor).order_by(models.Flavor.id)
        if is_public is not None:
            condition = models.Flavor.is_public == is_public
            if is_public and project_id is not None:
                condition = or_(condition, models.Flavor.projects.any(
                    models.FlavorProject.project_id == project_id))
            query = query.where(condition)
        return [_flavor_dict(f) for f in session.scalars(query)]


def flavor_update_description(db: Database, flavorid: str, description: str | None) -> FlavorDict:
    """:raises FlavorNotFound:"""
    with db.transaction() as session:
        flavor = _lookup(session, flavorid)
        flavor.description = description
        session.flush()
        return _flavor_dict(flavor)


def flavor_delete(db: Database, flavorid: str) -> None:
    """Delete a flavor and its extra specs; servers keep their snapshot of it.

    :raises FlavorNotFound:
    """
    with db.transaction() as session:
        session.delete(_lookup(session, flavorid))


def extra_specs_update(db: Database, flavorid: str, specs: dict[str, str]) -> dict[str, str]:
    """Create or replace the given extra specs (others stay); returns all of them.

    :raises FlavorNotFound:
    """
    with db.transaction() as session:
        flavor = _lookup(session, flavorid)
        existing = {spec.key: spec for spec in flavor.extra_specs}
        for key, value in specs.items():
            if key in existing:
                existing[key].value = value
            else:
                flavor.extra_specs.append(models.FlavorExtraSpec(key=key, value=value))
        flavor.updated_at = models.utcnow()
        session.flush()
        return {spec.key: spec.value for spec in flavor.extra_specs}


def extra_spec_delete(db: Database, flavorid: str, key: str) -> None:
    """:raises FlavorNotFound: :raises FlavorExtraSpecNotFound:"""
    with db.transaction() as session:
        flavor = _lookup(session, flavorid)
        for spec in flavor.extra_specs:
            if spec.key == key:
                flavor.extra_specs.remove(spec)
                flavor.updated_at = models.utcnow()
                return
        raise exception.FlavorExtraSpecNotFound(flavor_id=flavorid, key=key)


def _project_ids(flavor: models.Flavor) -> list[str]:
    return [access.project_id for access in flavor.projects]


def flavor_projects(db: Database, flavorid: str) -> list[str]:
    """The projects the flavor is shared with, in the order they were given access.

    :raises FlavorNotFound:
    """
    with db.transaction() as session:
        return _project_ids(_lookup(session, flavorid))


def flavor_access_add(db: Database, flavorid: str, project_id: str) -> list[str]:
    """Share the flavor with ``project_id``; returns every project it is shared with.

    :raises FlavorNotFound:
    :raises FlavorAccessExists: when it already is.
    """
    try:
        with db.transaction() as session:
            flavor = _lookup(session, flavorid)
            if project_id in _project_ids(flavor):
                raise exception.FlavorAccessExists(flavor_id=flavorid, project_id=project_id)
            flavor.projects.append(models.FlavorProject(project_id=project_id))
            session.flush()
            return _project_ids(flavor)
    except IntegrityError as exc:
        # A concurrent grant of the same project won the race.
        raise exception.FlavorAccessExists(flavor_id=flavorid, project_id=project_id) from exc


def flavor_access_remove(db: Database, flavorid: str, project_id: str) -> list[str]:
    """Stop sharing the flavor with ``project_id``; returns the projects it is still shared
    with.

    :raises FlavorNotFound:
    :raises FlavorAccessNotFound: when it is not shared with that project.
    """
    with db.transaction() as session:
        flavor = _lookup(session, flavorid)
        for access in flavor.projects:
            if access.project_id == project_id:
                flavor.projects.remove(access)
                session.flush()
                return _project_ids(flavor)
        raise exception.FlavorAccessNotFound(flavor_id=flavorid, project_id=project_id)
