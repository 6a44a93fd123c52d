"""Queries of instances (table ``instances``): the servers of the boot path.

State changes go through :func:`instance_update`, which can make them conditional on the
current ``vm_state``/``task_state`` (Nova's ``expected_task_state``): two actors racing on one
instance (a build finishing while a delete arrives) never both win.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Sequence
from typing import Any, TypedDict

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from fleetcache.common import exception, instance_states
from fleetcache.common.db import models
from fleetcache.common.db.session import Database

#: Columns :func:`instance_update` may change.
UPDATABLE = frozenset({
    "host", "node", "cell_id", "vm_state", "task_state", "conductor_host", "image_ref",
    "fault_message", "fault_code", "fault_details", "fault_created_at", "disk",
    "launched_at", "terminated_at", "display_name", "display_description", "access_ip_v4",
    "access_ip_v6", "auto_disk_config",
})
#: ``expected_*`` value meaning "any": the default.
ANY = object()


class _InstanceBase(TypedDict):
    uuid: str
    project_id: str | None
    user_id: str | None
    display_name: str
    image_ref: str
    flavor: dict[str, Any]
    reservation_id: str
    launch_index: int
    availability_zone: str | None
    requested_host: str | None


class InstanceCreate(_InstanceBase, total=False):
    """One instance to create (the API fills it; the rest starts empty). What the owner
    says of the server is optional: none of it, no description, no metadata."""

    display_description: str | None
    access_ip_v4: str | None
    access_ip_v6: str | None
    auto_disk_config: bool
    metadata: dict[str, str]


class InstanceDict(_InstanceBase):
    id: int
    host: str | None
    node: str | None
    cell_id: int | None
    vm_state: str
    task_state: str | None
    conductor_host: str | None
    fault_message: str | None
    fault_code: int | None
    fault_details: str | None
    fault_created_at: datetime.datetime | None
    disk: dict[str, Any] | None
    launched_at: datetime.datetime | None
    terminated_at: datetime.datetime | None
    created_at: datetime.datetime
    updated_at: datetime.datetime | None
    display_description: str | None
    access_ip_v4: str | None
    access_ip_v6: str | None
    auto_disk_config: bool
    #: The server's metadata, key -> value.
    metadata: dict[str, str]


#: The columns of :class:`InstanceDict` (``metadata`` is the column ``user_metadata``).
_COLUMNS = tuple(name for name in InstanceDict.__annotations__ if name != "metadata")


def _instance_dict(instance: models.Instance) -> InstanceDict:
    values = {name: getattr(instance, name) for name in _COLUMNS}
    values["flavor"] = dict(values["flavor"] or {})
    values["metadata"] = dict(instance.user_metadata or {})
    return InstanceDict(**values)  # type: ignore[typeddict-item,no-any-return]


def instances_create(db: Database, records: Sequence[InstanceCreate]) -> list[InstanceDict]:
    """Create instances in ``building``/``scheduling``, all or none."""
    with db.transaction() as session:
        rows = []
        for record in records:
            columns = {k: v for k, v in record.items() if k != "metadata"}
            rows.append(models.Instance(
                **columns, vm_state=instance_states.BUILDING,
                task_state=instance_states.SCHEDULING,
                user_metadata=dict(record.get("metadata") or {}) or None))
        session.add_all(rows)
        # Every column was given or has a Python-side default, so the flushed rows hold what
        # was written: reading each one back (a query per row) would only lengthen the
        # transaction, during which SQLite lets nobody else write (a heartbeat included).
        session.flush()
        return [_instance_dict(row) for row in rows]


def _lookup(session: Session, uuid: str, read_deleted: bool = False,
            for_update: bool = False) -> models.Instance:
    query = select(models.Instance).where(models.Instance.uuid == uuid)
    if not read_deleted:
        query = query.where(models.Instance.vm_state != instance_states.DELETED)
    if for_update:
        query = query.with_for_update()
    instance = session.scalars(query).first()
    if instance is None:
        raise exception.InstanceNotFound(instance_id=uuid)
    return instance


def instance_get(
    db: Database, uuid: str, project_id: str | None = None, read_deleted: bool = False
) -> InstanceDict:
    """:param project_id: when given, an instance of another project is not found.
    :raises InstanceNotFound:"""
    with db.transaction() as session:
        instance = _lookup(session, uuid, read_deleted)
        if project_id is not None and instance.project_id != project_id:
            raise exception.InstanceNotFound(instance_id=uuid)
        return _instance_dict(instance)


def instance_list(db: Database, project_id: str | None = None,
                  uuids: Collection[str] | None = None) -> list[InstanceDict]:
    """Instances not deleted, newest first (Nova's default sort), optionally one project's
    or those of ``uuids``."""
    with db.transaction() as session:
        query = (select(models.Instance)
                 .where(models.Instance.vm_state != instance_states.DELETED)
                 .order_by(models.Instance.created_at.desc(), models.Instance.id.desc()))
        if project_id is not None:
            query = query.where(models.Instance.project_id == project_id)
        if uuids is not None:
            query = query.where(models.Instance.uuid.in_(list(uuids)))
        return [_instance_dict(i) for i in session.scalars(query)]


def instance_update(
    db: Database,
    uuid: str,
    values: dict[str, Any],
    expected_vm_state: Collection[str] | object = ANY,
    expected_task_state: Collection[str | None] | object = ANY,
) -> InstanceDict:
    """Change ``values`` of a (not deleted) instance, only if its states are as expected.

    :raises InstanceNotFound:
    :raises InstanceInvalidState: when a state is not among the expected ones; nothing
        changed.
    """
    unknown = set(values) - UPDATABLE
    if unknown:
        raise exception.InvalidInput(reason=f"instance columns not updatable: {sorted(unknown)}")
    with db.transaction() as session:
        instance = _lookup(session, uuid)
        _check_state(instance, "vm_state", expected_vm_state, values)
        _check_state(instance, "task_state", expected_task_state, values)
        for key, value in values.items():
            setattr(instance, key, value)
        instance.updated_at = models.utcnow()
        session.flush()
        return _instance_dict(instance)


def instance_metadata_update(
    db: Database,
    uuid: str,
    metadata: dict[str, str],
    replace: bool,
    max_items: int,
    expected_vm_state: Collection[str],
    deleted: Collection[str] = (),
) -> dict[str, str]:
    """Change a server's metadata, as Nova's ``update_instance_metadata`` and
    ``delete_instance_metadata``: ``metadata`` replaces it all (``replace``) or is merged into
    it, then the keys of ``deleted`` go; only with no task running and ``vm_state`` among
    ``expected_vm_state``. The row is locked for the change (``SELECT ... FOR UPDATE``), so
    that two requests changing different keys both keep theirs.

    :returns: the metadata now.
    :raises InstanceNotFound:
    :raises InstanceInvalidState: a task runs, or another ``vm_state``.
    :raises InstanceMetadataLimitExceeded: the result would hold more than ``max_items``.
    """
    with db.transaction() as session:
        instance = _lookup(session, uuid, for_update=True)
        action = {"vm_state": "update metadata"}
        _check_state(instance, "vm_state", expected_vm_state, action)
        _check_state(instance, "task_state", [None], action)
        current = {} if replace else dict(instance.user_metadata or {})
        new = {**current, **metadata}
        for key in deleted:
            new.pop(key, None)
        if len(new) > max_items:
            raise exception.InstanceMetadataLimitExceeded(limit=max_items)
        instance.user_metadata = new or None
        instance.updated_at = models.utcnow()
        return new


def _check_state(instance: models.Instance, attr: str, expected: Collection[Any] | object,
                 values: dict[str, Any]) -> None:
    if expected is ANY:
        return
    state = getattr(instance, attr)
    if state not in expected:  # type: ignore[operator]
        raise exception.InstanceInvalidState(
            action=values.get("task_state") or values.get("vm_state") or "update",
            instance_uuid=instance.uuid, attr=attr, state=state)


def fault_values(message: str, code: int, details: str | None = None) -> dict[str, Any]:
    """The ``values`` of :func:`instance_update` that record a fault (Nova's
    ``instance_faults`` row, kept on the instance: only the latest fault is shown)."""
    return {"fault_message": message[:65535], "fault_code": code, "fault_details": details,
            "fault_created_at": models.utcnow()}


#: Task states of work in progress: an instance in one has a conductor working on it.
BUSY = (instance_states.SCHEDULING, instance_states.SPAWNING, instance_states.REBUILDING,
        instance_states.REBUILD_SPAWNING, instance_states.DELETING)


class BusyInstance(TypedDict):
    uuid: str
    conductor_host: str | None
    changed_at: datetime.datetime


def busy_list(db: Database, before: datetime.datetime) -> list[BusyInstance]:
    """Instances with work in progress (:data:`BUSY`) unchanged since ``before``."""
    changed = func.coalesce(models.Instance.updated_at, models.Instance.created_at)
    with db.transaction() as session:
        rows = session.execute(
            select(models.Instance.uuid, models.Instance.conductor_host, changed).where(
                models.Instance.vm_state != instance_states.DELETED,
                models.Instance.task_state.in_(BUSY),
                changed < before,
            ))
        return [BusyInstance(uuid=u, conductor_host=c, changed_at=t) for u, c, t in rows]


def fail_busy(db: Database, uuids: Collection[str], message: str) -> list[str]:
    """Put the instances of ``uuids`` still busy in ``error`` with ``message`` as fault: their
    work was left half done. A delete left half done goes to ``error`` too, so that deleting
    again finishes it.

    :returns: the uuids failed.
    """
    if not uuids:
        return []
    with db.transaction() as session:
        failed = list(session.scalars(select(models.Instance.uuid).where(
            models.Instance.uuid.in_(list(uuids)), models.Instance.task_state.in_(BUSY))))
        if failed:
            session.execute(
                update(models.Instance)
                .where(models.Instance.uuid.in_(failed), models.Instance.task_state.in_(BUSY))
                .values(vm_state=instance_states.ERROR, task_state=None,
                        updated_at=models.utcnow(), **fault_values(message, 500)))
        return failed
