"""Queries of flavors and their extra specs (tables ``flavors``, ``flavor_extra_specs``).

A flavor is known by its ``flavorid`` (the API's ``id``, a string); the integer ``id`` never
leaves this module. Every function runs one transaction and returns plain dicts.
"""

from __future__ import annotations

import datetime
from typing import TypedDict

from oslo_utils import uuidutils
from sqlalchemy import select
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


def flavor_list(db: Database, is_public: bool | None = None) -> list[FlavorDict]:
    """Flavors by internal id (creation order); ``is_public`` filters when not ``None``."""
    with db.transaction() as session:
        query = select(models.Flavor).order_by(models.Flavor.id)
        if is_public is not None:
            query = query.where(models.Flavor.is_public == is_public)
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
