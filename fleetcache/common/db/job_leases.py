"""Who runs a pre-cache job, and its hosts left ``pending`` for catch-up.

Ownership is a lease in the job's row (``owner``, ``lease_expires_at``). The owning conductor
renews the leases of all its jobs in one ``UPDATE``; any conductor claims a job whose lease has
expired with a compare-and-set ``UPDATE ... WHERE owner = <seen> AND lease_expires_at =
<seen>``: of two conductors claiming the same job, the database lets exactly one row update
succeed (``rowcount`` 1), on SQLite, PostgreSQL and MariaDB alike, with no ``SELECT ... FOR
UPDATE`` (which SQLite lacks). Times are the conductors' clocks, as for service heartbeats:
conductors must keep time (NTP) to within a small part of the lease.

Pending results are ordinary result rows in state ``pending``; catch-up replaces them with the
host's answer (:func:`fleetcache.common.db.jobs.job_record_hosts`), the window's end with
``skipped``.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from sqlalchemy import and_, case, exists, func, or_, select, update
from sqlalchemy.orm import Session

from fleetcache.common.db import jobs, models
from fleetcache.common.db.session import Database

#: Why a host added to the aggregate after the job started is pending.
ADDED_REASON = "added to the aggregate after the job started"


@dataclasses.dataclass(frozen=True)
class Lease:
    """A job's owner and lease as read, the expected values of a claim."""

    job_uuid: str
    owner: str | None
    expires_at: datetime.datetime | None
    state: str


def jobs_renew(db: Database, owner: str, until: datetime.datetime) -> set[str]:
    """Extend ``owner``'s leases of all its unfinished jobs to ``until``.

    :returns: the uuids of the jobs it still owns (a job another conductor claimed while this
        one stalled is no longer among them).
    """
    mine = and_(models.CacheJob.owner == owner,
                models.CacheJob.state.in_(jobs.ACTIVE_STATES))
    with db.transaction() as session:
        owned = set(session.scalars(select(models.CacheJob.uuid).where(mine)))
        if owned:
            session.execute(update(models.CacheJob).where(mine)
                            .values(lease_expires_at=until)
                            .execution_options(synchronize_session=False))
        return owned


def jobs_claimable(db: Database, now: datetime.datetime, owner: str,
                   host: str | None = None) -> list[Lease]:
    """Unfinished jobs whose lease expired (or that never had one), plus, with ``host``, the
    jobs of an earlier conductor process on ``host`` whatever their lease (that process is
    gone: one conductor runs per host)."""
    job = models.CacheJob
    expired = or_(job.lease_expires_at.is_(None), job.lease_expires_at < now)
    if host is not None:
        expired = or_(expired, and_(job.conductor_host == host,
                                    or_(job.owner.is_(None), job.owner != owner)))
    query = (select(job.uuid, job.owner, job.lease_expires_at, job.state)
             .where(job.state.in_(jobs.ACTIVE_STATES), expired,
                    or_(job.owner.is_(None), job.owner != owner))
             .order_by(job.id))
    with db.transaction() as session:
        return [Lease(*row) for row in session.execute(query)]


def job_claim(db: Database, seen: Lease, owner: str, host: str,
              until: datetime.datetime) -> bool:
    """Take the job over from ``seen.owner`` if nobody changed its lease since it was read.

    :returns: whether this caller now owns it (False: another conductor was faster, or the
        owner renewed, or the job ended).
    """
    job = models.CacheJob
    same_owner = job.owner.is_(None) if seen.owner is None else job.owner == seen.owner
    same_lease = (job.lease_expires_at.is_(None) if seen.expires_at is None
                  else job.lease_expires_at == seen.expires_at)
    with db.transaction() as session:
        result = session.execute(
            update(job)
            .where(job.uuid == seen.job_uuid, job.state.in_(jobs.ACTIVE_STATES),
                   same_owner, same_lease)
            .values(owner=owner, conductor_host=host, lease_expires_at=until)
            .execution_options(synchronize_session=False))
        return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def job_release(db: Database, job_uuid: str, owner: str) -> bool:
    """Let the job go at once (a conductor stopping cleanly): its lease expires now, so the
    next claim anywhere takes it. :returns: whether ``owner`` still held it."""
    job = models.CacheJob
    with db.transaction() as session:
        result = session.execute(
            update(job).where(job.uuid == job_uuid, job.owner == owner)
            .values(lease_expires_at=datetime.datetime(1970, 1, 1))
            .execution_options(synchronize_session=False))
        return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def _has_pending(session: Session, job_id: int) -> bool:
    return bool(session.scalar(select(exists().where(
        models.CacheJobResult.job_id == job_id,
        models.CacheJobResult.state == jobs.PENDING))))


def job_end_first_pass(db: Database, job_uuid: str, error: str | None = None,
                       owner: str | None = None) -> str:
    """End a job's first pass: ``failed`` with ``error``, else ``catching_up`` while a host is
    pending, else ``done``. With ``owner``, only if the job is still its own (a conductor that
    stalled past its lease lost the job to another, which ends it). :returns: the state."""
    with db.transaction() as session:
        job = jobs._lookup(session, job_uuid)
        if owner is not None and job.owner != owner:
            return job.state
        if error:
            job.state, job.error = jobs.FAILED, error
        elif _has_pending(session, job.id):
            job.state = jobs.CATCHING_UP
        else:
            job.state = jobs.DONE
        if job.state != jobs.CATCHING_UP:
            job.finished_at = models.utcnow()
        return job.state


def job_finish_if_caught_up(db: Database, job_uuid: str) -> bool:
    """Mark a ``catching_up`` job ``done`` once no host is pending. :returns: whether it did."""
    with db.transaction() as session:
        job = jobs._lookup(session, job_uuid)
        if job.state != jobs.CATCHING_UP or _has_pending(session, job.id):
            return False
        job.state = jobs.DONE
        job.finished_at = models.utcnow()
        return True


def job_close_window(db: Database, job_uuid: str, now: datetime.datetime) -> int:
    """The catch-up window closed: every pending host ends ``skipped`` (reason: why it was
    pending, and that the window closed) and the job ``done``. :returns: results closed."""
    stamp = now.replace(microsecond=0).isoformat() + "Z"
    with db.transaction() as session:
        job = jobs._lookup(session, job_uuid)
        rows = session.scalars(select(models.CacheJobResult).where(
            models.CacheJobResult.job_id == job.id,
            models.CacheJobResult.state == jobs.PENDING)).all()
        for row in rows:
            row.state = "skipped"
            row.reason = f"{row.reason or 'pending'}; catch-up window closed at {stamp}"
            row.updated_at = now
        if job.state == jobs.CATCHING_UP:
            job.state = jobs.DONE
            job.finished_at = now
        return len(rows)


def pending_by_job(db: Database, owner: str) -> dict[str, dict[str, dict[str, str | None]]]:
    """Pending results of ``owner``'s ``catching_up`` jobs: job uuid -> host -> image ->
    reason, in one query."""
    res, job = models.CacheJobResult, models.CacheJob
    query = (select(job.uuid, res.host, res.image_id, res.reason)
             .join(res, res.job_id == job.id)
             .where(job.owner == owner, job.state == jobs.CATCHING_UP,
                    res.state == jobs.PENDING))
    found: dict[str, dict[str, dict[str, str | None]]] = {}
    with db.transaction() as session:
        for job_uuid, host, image_id, reason in session.execute(query):
            found.setdefault(job_uuid, {}).setdefault(host, {})[image_id] = reason
    return found


@dataclasses.dataclass(frozen=True)
class CatchingUp:
    """What catch-up needs of a ``catching_up`` job."""

    job_uuid: str
    aggregate_id: int
    image_ids: list[str]
    catch_up_until: datetime.datetime | None
    #: The request's terms (its deadline ends catch-up too).
    terms: dict[str, Any]
    #: The aggregate's hosts when the job was created (None for jobs that predate it).
    hosts: list[str] | None


def jobs_catching_up(db: Database, owner: str) -> list[CatchingUp]:
    """``owner``'s ``catching_up`` jobs."""
    job = models.CacheJob
    query = (select(job.uuid, job.aggregate_id, job.image_ids, job.catch_up_until, job.terms,
                    job.hosts)
             .where(job.owner == owner, job.state == jobs.CATCHING_UP))
    with db.transaction() as session:
        return [CatchingUp(u, a, list(i), c, dict(t or {}), None if h is None else list(h))
                for u, a, i, c, t, h in session.execute(query)]


def jobs_add_host(db: Database, host: str, now: datetime.datetime) -> list[str]:
    """Make ``host`` pending in the unfinished jobs of its aggregates whose catch-up window is
    open and that do not know it yet (it was added to the aggregate after the job started).

    :returns: the uuids of the jobs it was added to.
    """
    res, job = models.CacheJobResult, models.CacheJob
    added = []
    with db.transaction() as session:
        aggregate_ids = select(models.AggregateHost.aggregate_id).where(
            models.AggregateHost.host == host)
        candidates = session.scalars(select(job).where(
            job.aggregate_id.in_(aggregate_ids),
            job.state.in_(jobs.ACTIVE_STATES),
            job.catch_up_until.is_not(None), job.catch_up_until > now,
            ~exists().where(res.job_id == job.id, res.host == host))).all()
        for candidate in candidates:
            if candidate.hosts is not None and host in candidate.hosts:
                continue  # the first pass asks it (or already did and its result is due)
            # NOTE: two conductors adding the same host at once: the unique (job, host, image)
            # constraint fails the second transaction, which its caller logs.
            for image_id in candidate.image_ids:
                session.add(res(job_id=candidate.id, host=host, image_id=image_id,
                                state=jobs.PENDING, reason=ADDED_REASON,
                                bytes_downloaded=0, updated_at=now))
            session.execute(update(job).where(job.id == candidate.id)
                            .values(total_hosts=job.total_hosts + 1)
                            .execution_options(synchronize_session=False))
            added.append(candidate.uuid)
    return added


def job_unfinished_hosts(db: Database, job_uuid: str,
                         aggregate_hosts: list[str]) -> list[str]:
    """Hosts of a job that still have to be asked in its first pass (after a takeover, or in
    its next window): its hosts (``aggregate_hosts`` for a job that predates the host list)
    without a result for every image, or with one still ``waiting`` (for a download slot,
    or paused at its window's end). A host whose results are all final or ``pending`` is not
    asked again by the first pass."""
    result = models.CacheJobResult
    with db.transaction() as session:
        job = jobs._lookup(session, job_uuid)
        hosts = list(job.hosts) if job.hosts is not None else list(aggregate_hosts)
        reported = set(session.scalars(
            select(result.host).where(result.job_id == job.id)
            .group_by(result.host)
            .having(func.count() >= len(job.image_ids),
                    func.sum(case((result.state == jobs.WAITING, 1), else_=0)) == 0)))
        return [h for h in hosts if h not in reported]


def job_end_at_deadline(db: Database, job_uuid: str, aggregate_hosts: list[str],
                        now: datetime.datetime, owner: str | None = None) -> int:
    """The job's deadline passed: every image of its hosts without a final result (none,
    ``waiting`` or ``pending``) ends ``skipped`` saying so (the bytes a paused download
    kept stay counted), and the job ``done``.

    :param owner: only if the job is still this conductor's.
    :returns: the results it settled.
    """
    result = models.CacheJobResult
    stamp = now.replace(microsecond=0).isoformat() + "Z"
    reason = f"the job's deadline passed at {stamp} before this host finished"
    with db.transaction() as session:
        job = jobs._lookup(session, job_uuid)
        if owner is not None and job.owner != owner:
            return 0
        hosts = list(job.hosts) if job.hosts is not None else list(aggregate_hosts)
        final = set(session.execute(
            select(result.host, result.image_id).where(
                result.job_id == job.id, result.state.in_(jobs.FINAL_RESULT_STATES))).all())
        stored = {(h, i): row_id for row_id, h, i in session.execute(
            select(result.id, result.host, result.image_id).where(result.job_id == job.id))}
        settled = 0
        for host in hosts:
            for image_id in job.image_ids:
                if (host, image_id) in final:
                    continue
                fields = {"state": "skipped", "reason": reason, "updated_at": now}
                row_id = stored.get((host, image_id))
                if row_id is None:
                    session.add(result(job_id=job.id, host=host, image_id=image_id,
                                       bytes_downloaded=0, **fields))
                else:
                    session.execute(update(result).where(result.id == row_id).values(**fields))
                settled += 1
        job.state, job.finished_at, job.next_start_at = jobs.DONE, now, None
        return settled


def count_results(db: Database, job_uuid: str) -> int:
    """How many result rows the job has (tests use it to show nothing was doubled)."""
    with db.transaction() as session:
        return int(session.scalar(select(func.count()).select_from(models.CacheJobResult)
                                  .where(models.CacheJobResult.job_id ==
                                         jobs._job_id(session, job_uuid))) or 0)


def count_hosts_finished(db: Database, job_uuid: str) -> int:
    """How many of the job's hosts have their outcome: a result, none of them ``pending`` or
    ``waiting`` (the index of a caught-up host's progress notification)."""
    result = models.CacheJobResult
    with db.transaction() as session:
        job_id = jobs._job_id(session, job_uuid)
        unfinished = (select(result.host).where(result.job_id == job_id,
                                                result.state.in_((jobs.PENDING, jobs.WAITING)))
                      .scalar_subquery())
        return int(session.scalar(
            select(func.count(result.host.distinct()))
            .where(result.job_id == job_id, result.host.not_in(unfinished))) or 0)
