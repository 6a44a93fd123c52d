"""Download leases: slots of the image service shared by every conductor.

A conductor takes a lease before it asks a host to download an image, and gives it back when
the host answered. :func:`lease_acquire` counts the live leases and inserts one only when
both limits (per image, overall) allow it, in one transaction that first *writes* the
origin's gate row (``UPDATE download_gates SET generation = generation + 1``). That write is
what makes the count and the insert atomic on every backend the project runs on:

* PostgreSQL and MariaDB/InnoDB lock the row until the transaction ends, so a second
  conductor's ``UPDATE`` waits; under READ COMMITTED (PostgreSQL) and REPEATABLE READ
  (InnoDB, whose snapshot starts at the first plain ``SELECT``, after the lock) the counts
  then see every lease committed before;
* SQLite takes its one write lock at that first write (waiting up to the ``timeout`` of the
  connection), and the transaction's snapshot starts there too.

Releases and renewals take the same gate lock first: every writer of the leases then locks
in one order (gate, then leases), so InnoDB's gap locks of the expiry clean-up can never
deadlock with a release (seen in ``test_racing_conductors_never_exceed_the_limits`` before
they did). At a few lease writes a second per conductor the serialization costs nothing.

A lease lapses at ``expires_at``: its holder renews it while the host works
(:func:`leases_renew`), so a conductor that dies frees its slots within one lease time, and
lapsed leases are deleted by the next acquirer. Times are the database host's view as the
conductors write them (naive UTC from each conductor: their clocks must agree, as the
service heartbeats already require).

Priority between jobs: a caller that gets no lease becomes a *waiter* (a row of
``download_waiters`` with its job's priority, written in the same transaction), and passes
the waiter's id to its next attempt, which refreshes it (it lapses after
:data:`WAITER_SECONDS` without one, as the waiters of a conductor that died do) or deletes it
with the lease it takes. A caller the limits let through is refused all the same while a live
waiter of a *higher* priority, of any conductor, could take the slot it would take: one of the
same image, or, under the overall limit, one of any image whose own per-image slots are not
all taken. So the next free slot goes to the highest priority waiting; equal priorities never
hold each other back (as before waiters existed), and a waiter never counts against itself.
The waiters are read and written after the gate row, as the leases are: the argument above
covers them too, and the lock order is gate, leases, waiters for every writer.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import TypedDict

from sqlalchemy import ColumnElement, delete, func, or_, select, true, update
from sqlalchemy.orm import Session

from fleetcache.common import job_terms
from fleetcache.common.db import models
from fleetcache.common.db.session import Database

#: The gate of the image service (the one origin so far; a peer source may add its own).
IMAGE_SERVICE = "image-service"
#: Seconds a waiter lives unless its holder's next attempt refreshes it. A waiting host tries
#: again at least every 2 s (``origin.MAX_RETRY``): five attempts missed (a conductor that
#: died, a database that did not answer) and it no longer keeps slots from anyone.
WAITER_SECONDS = 10.0


@dataclasses.dataclass(frozen=True)
class Limits:
    """Most leases at once per image and overall; 0 is no limit."""

    per_image: int = 0
    total: int = 0

    @property
    def enabled(self) -> bool:
        return bool(self.per_image or self.total)


@dataclasses.dataclass(frozen=True)
class Grant:
    """The answer of :func:`lease_acquire`: a lease id, or why there is none yet and the
    caller's waiter (to pass to its next attempt)."""

    lease_id: int | None
    reason: str | None = None
    waiter_id: int | None = None


class LeaseDict(TypedDict):
    id: int
    holder: str
    host: str
    image_id: str
    job_uuid: str | None
    created_at: datetime.datetime
    expires_at: datetime.datetime


class WaiterDict(TypedDict):
    id: int
    holder: str
    host: str
    image_id: str
    job_uuid: str | None
    priority: int
    created_at: datetime.datetime
    expires_at: datetime.datetime


def _lock_gate(session: Session, gate: str) -> None:
    """Write the gate row first thing in the transaction (see the module docstring)."""
    result = session.execute(
        update(models.DownloadGate).where(models.DownloadGate.name == gate)
        .values(generation=models.DownloadGate.generation + 1))
    if result.rowcount == 0:  # type: ignore[attr-defined]
        # Only a database synced before the gate existed lacks the row; a conductor racing
        # this insert gets an IntegrityError and its caller tries again.
        session.add(models.DownloadGate(name=gate, generation=1))
        session.flush()


def lease_acquire(db: Database, holder: str, host: str, image_id: str, limits: Limits,
                  ttl: float, job_uuid: str | None = None,
                  gate: str = IMAGE_SERVICE, *, priority: int = job_terms.DEFAULT_PRIORITY,
                  waiter_id: int | None = None,
                  waiter_ttl: float = WAITER_SECONDS) -> Grant:
    """Take a lease for ``host``'s download of ``image_id`` if ``limits`` allow it and no
    waiter of a higher priority could take that slot; otherwise register (or refresh) the
    caller as a waiter.

    :param holder: the conductor taking it (it renews and releases its own leases).
    :param ttl: seconds the lease lives unless renewed.
    :param priority: the job's priority (higher first; equal ones never wait for each other).
    :param waiter_id: the caller's waiter from its previous attempt's :class:`Grant`, if any:
        refreshed when refused again, deleted with the lease taken.
    :param waiter_ttl: seconds the waiter lives unless the next attempt refreshes it.
    :returns: the lease's id, or ``None`` with the limit that is full (or the priority that
        goes first) and the caller's waiter.
    :raises sqlalchemy.exc.OperationalError, IntegrityError: a lock timeout or a racing first
        gate insert; nothing was taken nor registered, the caller may try again.
    """
    with db.transaction() as session:
        _lock_gate(session, gate)
        now = models.utcnow()
        session.execute(delete(models.DownloadLease).where(
            models.DownloadLease.expires_at <= now))
        session.execute(delete(models.DownloadWaiter).where(
            models.DownloadWaiter.expires_at <= now))
        reason = (_full_limit(session, image_id, limits)
                  or _waiting_before(session, image_id, limits, priority, waiter_id))
        if reason is not None:
            waiter = models.DownloadWaiter(
                holder=holder, host=host, image_id=image_id, job_uuid=job_uuid,
                priority=priority, created_at=now,
                expires_at=now + datetime.timedelta(seconds=waiter_ttl))
            return Grant(None, reason, _refresh_waiter(session, waiter, waiter_id))
        if waiter_id is not None:
            session.execute(delete(models.DownloadWaiter).where(
                models.DownloadWaiter.id == waiter_id))
        lease = models.DownloadLease(
            holder=holder, host=host, image_id=image_id, job_uuid=job_uuid, created_at=now,
            expires_at=now + datetime.timedelta(seconds=ttl))
        session.add(lease)
        session.flush()
        return Grant(lease.id)


def _full_limit(session: Session, image_id: str, limits: Limits) -> str | None:
    """The limit a new lease of ``image_id`` would exceed, if any."""
    if limits.total:
        taken = session.scalar(select(func.count()).select_from(models.DownloadLease))
        if (taken or 0) >= limits.total:
            return (f"{taken} downloads from the image service in progress "
                    f"([image_cache] max_concurrent_downloads = {limits.total})")
    if limits.per_image:
        taken = session.scalar(select(func.count()).select_from(models.DownloadLease)
                               .where(models.DownloadLease.image_id == image_id))
        if (taken or 0) >= limits.per_image:
            return (f"{taken} hosts downloading this image "
                    f"([image_cache] max_concurrent_downloads_per_image = {limits.per_image})")
    return None


def _waiting_before(session: Session, image_id: str, limits: Limits, priority: int,
                    waiter_id: int | None) -> str | None:
    """Why a caller of ``priority`` leaves the slot to a live waiter of a higher one that
    could take it (see the module docstring), if one waits."""
    waiter = models.DownloadWaiter
    competes: ColumnElement[bool] = waiter.image_id == image_id
    if limits.total and limits.per_image:
        full = (select(models.DownloadLease.image_id).group_by(models.DownloadLease.image_id)
                .having(func.count() >= limits.per_image))
        competes = or_(competes, waiter.image_id.not_in(full))
    elif limits.total:
        competes = true()
    query = select(func.max(waiter.priority)).where(
        waiter.priority > priority, waiter.expires_at > models.utcnow(), competes)
    if waiter_id is not None:
        query = query.where(waiter.id != waiter_id)
    first = session.scalar(query)
    return None if first is None else f"a job of priority {first} waits for this slot"


def _refresh_waiter(session: Session, waiter: models.DownloadWaiter,
                    waiter_id: int | None) -> int:
    """Push the caller's waiter ``waiter_id`` to ``waiter``'s expiry, or add ``waiter`` when
    there is none (a first attempt, or one that lapsed). :returns: the waiter's id."""
    if waiter_id is not None:
        result = session.execute(
            update(models.DownloadWaiter)
            .where(models.DownloadWaiter.id == waiter_id,
                   models.DownloadWaiter.holder == waiter.holder)
            .values(priority=waiter.priority, expires_at=waiter.expires_at))
        if result.rowcount:  # type: ignore[attr-defined]
            return waiter_id
    session.add(waiter)
    session.flush()
    return waiter.id


def waiter_release(db: Database, waiter_id: int, gate: str = IMAGE_SERVICE) -> None:
    """Delete waiter ``waiter_id``: its host stopped waiting without a lease (gone already:
    nothing to do)."""
    with db.transaction() as session:
        _lock_gate(session, gate)
        session.execute(delete(models.DownloadWaiter).where(
            models.DownloadWaiter.id == waiter_id))


def leases_renew(db: Database, holder: str, lease_ids: list[int], ttl: float,
                 gate: str = IMAGE_SERVICE) -> int:
    """Push the expiry of ``holder``'s leases ``lease_ids`` to ``ttl`` seconds from now, in
    one statement. :returns: how many were renewed (a lapsed and deleted one is not)."""
    if not lease_ids:
        return 0
    with db.transaction() as session:
        _lock_gate(session, gate)
        result = session.execute(
            update(models.DownloadLease)
            .where(models.DownloadLease.holder == holder,
                   models.DownloadLease.id.in_(lease_ids))
            .values(expires_at=models.utcnow() + datetime.timedelta(seconds=ttl)))
        return int(result.rowcount)  # type: ignore[attr-defined]


def lease_release(db: Database, lease_id: int, gate: str = IMAGE_SERVICE) -> None:
    """Give lease ``lease_id`` back (gone already: nothing to do)."""
    with db.transaction() as session:
        _lock_gate(session, gate)
        session.execute(delete(models.DownloadLease).where(models.DownloadLease.id == lease_id))


def leases_release_holders(db: Database, prefix: str, gate: str = IMAGE_SERVICE) -> int:
    """Give back every lease, and delete every waiter, whose holder starts with ``prefix`` (a
    conductor starting on a host releases what its predecessor there left, instead of waiting
    for them to lapse). :returns: how many leases were released."""
    with db.transaction() as session:
        _lock_gate(session, gate)
        result = session.execute(delete(models.DownloadLease).where(
            models.DownloadLease.holder.startswith(prefix, autoescape=True)))
        session.execute(delete(models.DownloadWaiter).where(
            models.DownloadWaiter.holder.startswith(prefix, autoescape=True)))
        return int(result.rowcount)  # type: ignore[attr-defined]


def leases_list(db: Database, live_only: bool = True) -> list[LeaseDict]:
    """The leases, oldest first (``live_only``: those not yet lapsed)."""
    with db.transaction() as session:
        query = select(models.DownloadLease).order_by(models.DownloadLease.id)
        if live_only:
            query = query.where(models.DownloadLease.expires_at > models.utcnow())
        return [LeaseDict(id=row.id, holder=row.holder, host=row.host, image_id=row.image_id,
                          job_uuid=row.job_uuid, created_at=row.created_at,
                          expires_at=row.expires_at)
                for row in session.scalars(query)]


def waiters_list(db: Database, live_only: bool = True) -> list[WaiterDict]:
    """The hosts waiting for a slot, oldest first (``live_only``: those not yet lapsed)."""
    with db.transaction() as session:
        query = select(models.DownloadWaiter).order_by(models.DownloadWaiter.id)
        if live_only:
            query = query.where(models.DownloadWaiter.expires_at > models.utcnow())
        return [WaiterDict(id=row.id, holder=row.holder, host=row.host, image_id=row.image_id,
                           job_uuid=row.job_uuid, priority=row.priority,
                           created_at=row.created_at, expires_at=row.expires_at)
                for row in session.scalars(query)]
