"""Queries of pre-cache jobs and their per-host, per-image results.

A job moves ``queued -> running -> done | failed``, through ``catching_up`` when its first pass
left hosts ``pending`` (down, disabled, or added to the aggregate since): it is ``done`` once no
host is pending, or once its catch-up window closes (pending hosts then end ``skipped``). A job
is owned by one conductor process under a lease; when that conductor dies, another one (or the
same host's next conductor) claims the job and carries it on (:mod:`.job_leases`).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from oslo_utils import uuidutils
from sqlalchemy import func, insert, select, update
from sqlalchemy.orm import Session, defer, lazyload

from fleetcache.common import exception
from fleetcache.common.db import models
from fleetcache.common.db.inlist import padded
from fleetcache.common.db.session import Database

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
#: The first pass is over; some hosts are ``pending`` until they are caught up.
CATCHING_UP = "catching_up"
#: Waiting for its window (``not_before``, the daily window): ``next_start_at`` says until when.
SCHEDULED = "scheduled"
JOB_STATES = (QUEUED, SCHEDULED, RUNNING, CATCHING_UP, DONE, FAILED)
#: Jobs some conductor still has to carry on.
ACTIVE_STATES = (QUEUED, SCHEDULED, RUNNING, CATCHING_UP)
#: Per host, per image outcomes that no later pass changes (a compute answers ``skipped`` with
#: the reason ``disk`` when caching would bring its free space below ``[image_cache]
#: disk_free_floor``).
FINAL_RESULT_STATES = ("cached", "existing", "error", "unsupported", "skipped")
#: A host that was not asked yet, and will be when it comes back (within the window).
PENDING = "pending"
#: Per host, per image outcomes: the final ones, and ``pending`` for a host to catch up.
RESULT_STATES = (*FINAL_RESULT_STATES, PENDING)
#: A host the conductor has not asked yet because the image service's download slots are
#: taken (``[image_cache] max_concurrent_downloads*``); replaced by the host's outcome.
WAITING = "waiting"
#: Every state a stored result may be in: the outcomes, and the interim ``waiting``.
STORED_STATES = (*RESULT_STATES, WAITING)


class ResultFields(TypedDict):
    """The stored outcome of one image on one host (the conductor's checked reading of the
    compute's ``ImageResult`` reply, or its own verdict for a host it did not ask)."""

    state: str
    reason: str | None
    bytes_downloaded: int
    #: ``rbd``, ``http`` or ``peer`` for a download (absent or None: not a download, or an
    #: old compute).
    download_path: NotRequired[str | None]
    #: Why an image with an ``rbd://`` location went over HTTP, or why a host given peers
    #: fetched (some of) the image from the image service.
    fallback_reason: NotRequired[str | None]
    #: The peer host that sent the image's bytes.
    source_host: NotRequired[str | None]
    #: Of ``bytes_downloaded``, those that came from peers.
    bytes_from_peers: NotRequired[int | None]


class JobResultDict(TypedDict):
    host: str
    image_id: str
    state: str
    reason: str | None
    bytes_downloaded: int
    download_path: str | None
    fallback_reason: str | None
    source_host: str | None
    bytes_from_peers: int | None
    updated_at: datetime.datetime


class JobDict(TypedDict):
    id: int
    uuid: str
    aggregate_id: int
    aggregate_uuid: str
    image_ids: list[str]
    state: str
    conductor_host: str | None
    total_hosts: int
    created_at: datetime.datetime
    started_at: datetime.datetime | None
    finished_at: datetime.datetime | None
    error: str | None
    #: Until when the job's images are pinned on its hosts; None: no pin.
    pin_until: datetime.datetime | None
    #: The aggregate's hosts at creation (None for jobs that predate it).
    hosts: list[str] | None
    #: ``<host>:<uuid>`` of the conductor process running the job.
    owner: str | None
    lease_expires_at: datetime.datetime | None
    catch_up_until: datetime.datetime | None
    #: The request's terms (``fleetcache.common.job_terms.JobTerms``); ``{}``: none.
    terms: dict[str, Any]
    #: While ``scheduled``: when its window next opens.
    next_start_at: datetime.datetime | None
    results: list[JobResultDict]


class JobDistribution(TypedDict):
    """Where a job's downloads came from (peer distribution's figures)."""

    origin_copies: int
    peer_copies: int
    bytes_from_origin: int
    bytes_from_peers: int
    offload_percent: float
    time_to_all_hosts: float | None


def job_distribution(job: JobDict) -> JobDistribution:
    """Where the job's downloads came from: copies taken from the image service (Glance or
    Ceph) and from peers, their bytes, the share peers took off the image service, and the
    seconds from the job's start to its last host's result (once every host has one). The
    API's job view and the job's end notification give it."""
    downloads = [r for r in job["results"] if r["state"] == "cached"]
    from_peers = sum(r["bytes_from_peers"] or 0 for r in downloads)
    total = sum(r["bytes_downloaded"] for r in downloads)
    reported = [r for r in job["results"] if r["state"] in FINAL_RESULT_STATES]
    started, elapsed = job["started_at"], None
    if (started is not None and reported
            and len({r["host"] for r in reported}) >= job["total_hosts"]):
        elapsed = round((max(r["updated_at"] for r in reported) - started).total_seconds(), 3)
    return JobDistribution(
        origin_copies=sum(1 for r in downloads if r["download_path"] != "peer"),
        peer_copies=sum(1 for r in downloads if r["download_path"] == "peer"),
        bytes_from_origin=total - from_peers,
        bytes_from_peers=from_peers,
        offload_percent=round(100.0 * from_peers / total, 1) if total else 0.0,
        time_to_all_hosts=elapsed,
    )


def _job_dict(job: models.CacheJob,
              results: list[models.CacheJobResult] | None = None) -> JobDict:
    """:param results: the results to give (default: all the job's)."""
    return JobDict(
        id=job.id,
        uuid=job.uuid,
        aggregate_id=job.aggregate_id,
        aggregate_uuid=job.aggregate_uuid,
        image_ids=list(job.image_ids),
        state=job.state,
        conductor_host=job.conductor_host,
        total_hosts=job.total_hosts,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        error=job.error,
        pin_until=job.pin_until,
        hosts=list(job.hosts) if job.hosts is not None else None,
        owner=job.owner,
        lease_expires_at=job.lease_expires_at,
        catch_up_until=job.catch_up_until,
        terms=dict(job.terms or {}),
        next_start_at=job.next_start_at,
        results=[
            JobResultDict(
                host=r.host,
                image_id=r.image_id,
                state=r.state,
                reason=r.reason,
                bytes_downloaded=r.bytes_downloaded,
                download_path=r.download_path,
                fallback_reason=r.fallback_reason,
                source_host=r.source_host,
                bytes_from_peers=r.bytes_from_peers,
                updated_at=r.updated_at,
            )
            for r in (job.results if results is None else results)
        ],
    )


def _lookup(session: Session, job_uuid: str, whole: bool = False) -> models.CacheJob:
    """The job's row; its results and host list are loaded only with ``whole`` (or when read).

    NOTE: the results relationship loads eagerly (``selectin``), so every state change read
    the whole job: marking a 10,000-host job done built 10,000 result objects at once, a peak
    the conductor's resident size kept (``bench/conductor_memory.py --trace``,
    docs/performance.md, "What a pre-cache job holds per host").
    """
    query = select(models.CacheJob).where(models.CacheJob.uuid == job_uuid)
    if not whole:
        query = query.options(lazyload(models.CacheJob.results), defer(models.CacheJob.hosts))
    job = session.scalars(query).first()
    if job is None:
        raise exception.JobNotFound(job_id=job_uuid)
    return job


def _job_id(session: Session, job_uuid: str) -> int:
    """The job's primary key, read alone. :raises JobNotFound:"""
    job_id = session.scalar(select(models.CacheJob.id).where(models.CacheJob.uuid == job_uuid))
    if job_id is None:
        raise exception.JobNotFound(job_id=job_uuid)
    return int(job_id)


def job_create(
    db: Database,
    aggregate_id: int,
    aggregate_uuid: str,
    image_ids: list[str],
    total_hosts: int,
    conductor_host: str | None,
    pin_until: datetime.datetime | None = None,
    hosts: list[str] | None = None,
    owner: str | None = None,
    lease_expires_at: datetime.datetime | None = None,
    catch_up_until: datetime.datetime | None = None,
    terms: Mapping[str, Any] | None = None,
) -> JobDict:
    """Create a ``queued`` job, owned by ``owner`` until ``lease_expires_at``, with the
    request's ``terms`` (``fleetcache.common.job_terms.JobTerms``)."""
    with db.transaction() as session:
        job = models.CacheJob(
            uuid=uuidutils.generate_uuid(),
            aggregate_id=aggregate_id,
            aggregate_uuid=aggregate_uuid,
            image_ids=list(image_ids),
            state=QUEUED,
            total_hosts=total_hosts,
            conductor_host=conductor_host,
            pin_until=pin_until,
            hosts=list(hosts) if hosts is not None else None,
            owner=owner,
            lease_expires_at=lease_expires_at,
            catch_up_until=catch_up_until,
            terms=dict(terms) if terms else None,
        )
        session.add(job)
        session.flush()
        return _job_dict(job)


def job_get(db: Database, job_uuid: str, results_of: str | None = None) -> JobDict:
    """The job and its results; with ``results_of``, only that host's results (reading them
    costs what the host's rows cost, whatever the job's size).

    :raises JobNotFound:
    """
    with db.transaction() as session:
        if results_of is None:
            return _job_dict(_lookup(session, job_uuid, whole=True))
        job = _lookup(session, job_uuid)
        result = models.CacheJobResult
        rows = session.scalars(select(result).where(result.job_id == job.id,
                                                    result.host == results_of)
                               .order_by(result.id)).all()
        return _job_dict(job, list(rows))


def job_list(db: Database, aggregate_id: int | None = None) -> list[JobDict]:
    with db.transaction() as session:
        query = select(models.CacheJob).order_by(models.CacheJob.id)
        if aggregate_id is not None:
            query = query.where(models.CacheJob.aggregate_id == aggregate_id)
        return [_job_dict(j) for j in session.scalars(query)]


def job_set_state(db: Database, job_uuid: str, state: str, error: str | None = None) -> None:
    """Move a job to ``state``; the first ``running`` stamps ``started_at`` (a job taken over
    keeps it), an end state ``finished_at``."""
    if state not in JOB_STATES:
        raise exception.InvalidInput(reason=f"unknown job state {state!r}")
    with db.transaction() as session:
        job = _lookup(session, job_uuid)
        job.state = state
        now = models.utcnow()
        if state == RUNNING:
            job.next_start_at = None
            if job.started_at is None:
                job.started_at = now
        elif state in (DONE, FAILED):
            job.finished_at = now
        if error is not None:
            job.error = error


def job_schedule(db: Database, job_uuid: str, next_start_at: datetime.datetime,
                 owner: str | None = None) -> bool:
    """The job waits for its window: ``scheduled`` until ``next_start_at`` (naive UTC).

    :param owner: only if the job is still this conductor's (a run that stalled past its
        lease lost the job to another, which schedules it itself).
    :returns: whether it did.
    """
    with db.transaction() as session:
        job = _lookup(session, job_uuid)
        if owner is not None and job.owner != owner:
            return False
        job.state = SCHEDULED
        job.next_start_at = next_start_at
        return True


def job_claim_due(db: Database, job_uuid: str, owner: str) -> bool:
    """Take a due ``scheduled`` job of ``owner`` to ``queued``, once: a compare-and-set, so
    that a job whose run waits for a coordinator thread is not started again by the next
    look, nor by a conductor that lost it. :returns: whether this caller may start it."""
    job = models.CacheJob
    with db.transaction() as session:
        result = session.execute(
            update(job).where(job.uuid == job_uuid, job.owner == owner,
                              job.state == SCHEDULED)
            .values(state=QUEUED).execution_options(synchronize_session=False))
        return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def jobs_due(db: Database, owner: str, now: datetime.datetime) -> list[str]:
    """``owner``'s ``scheduled`` jobs whose window opens by ``now``, oldest first."""
    job = models.CacheJob
    with db.transaction() as session:
        return list(session.scalars(
            select(job.uuid).where(job.owner == owner, job.state == SCHEDULED,
                                   job.next_start_at <= now).order_by(job.id)))


def job_record_hosts(
    db: Database, job_uuid: str, results_by_host: Mapping[str, Mapping[str, ResultFields]]
) -> None:
    """Store (or replace) what several hosts reported, in one transaction.

    It never loads the job's other results, so its cost follows the batch, not the job: the
    conductor writes a 1,000-host job in a few batches. Rows are written with one multi-row
    ``INSERT`` (and one ``UPDATE`` by primary key for rows already there), not through ORM
    objects.

    NOTE: building one ORM object per row and letting the unit of work flush them showed in
    the conductor's py-spy samples in ``bench/fanout.py`` at 1,000 hosts (docs/performance.md,
    "The pre-cache job's own CPU per host").

    :raises JobNotFound:
    :raises InvalidInput: for an unknown result state (nothing of the batch is stored).
    """
    if not results_by_host:
        return
    rows: list[tuple[tuple[str, str], dict[str, Any]]] = []
    now = models.utcnow()
    for host, results in results_by_host.items():
        for image_id, result in results.items():
            if result["state"] not in STORED_STATES:
                raise exception.InvalidInput(reason=f"unknown result state {result['state']!r}")
            rows.append(((host, image_id), {
                "host": host, "image_id": image_id, "state": result["state"],
                "reason": result["reason"], "bytes_downloaded": int(result["bytes_downloaded"]),
                "download_path": result.get("download_path"),
                "fallback_reason": result.get("fallback_reason"),
                "source_host": result.get("source_host"),
                "bytes_from_peers": result.get("bytes_from_peers"), "updated_at": now,
            }))
    table = models.CacheJobResult
    with db.transaction() as session:
        job_id = _job_id(session, job_uuid)
        existing = {
            (host, image_id): (row_id, state) for row_id, host, image_id, state in
            session.execute(
                select(table.id, table.host, table.image_id, table.state).where(
                    table.job_id == job_id, table.host.in_(padded(results_by_host))))
        }
        inserts, updates = [], []
        for key, row in rows:
            row_id, stored = existing.get(key, (None, None))
            if row_id is None:
                inserts.append({"job_id": job_id, **row})
            elif not (stored == "cached" and row["state"] == "existing"):
                # A host asked again (after a takeover, or in the job's next window) answers
                # ``existing`` for what it downloaded in this job: the job keeps ``cached``.
                updates.append({"id": row_id, **row})
        if inserts:
            session.execute(insert(table), inserts)
        if updates:
            session.execute(update(table), updates)


class JobProgressDict(TypedDict):
    """How far a job is, without its results: what a page polling every few seconds needs."""

    uuid: str
    state: str
    total_hosts: int
    hosts_reported: int
    counts: dict[str, int]


def job_list_recent(db: Database, limit: int) -> list[JobDict]:
    """The ``limit`` newest jobs of every aggregate, newest first, with their results."""
    with db.transaction() as session:
        query = select(models.CacheJob).order_by(models.CacheJob.id.desc()).limit(limit)
        return [_job_dict(j) for j in session.scalars(query)]


def job_progress_recent(db: Database, limit: int) -> list[JobProgressDict]:
    """The progress of the ``limit`` newest jobs, newest first, in two queries whatever the
    number of hosts: results are counted by the database, never loaded."""
    with db.transaction() as session:
        rows = session.execute(
            select(models.CacheJob.id, models.CacheJob.uuid, models.CacheJob.state,
                   models.CacheJob.total_hosts)
            .order_by(models.CacheJob.id.desc()).limit(limit)).all()
        by_id = {row.id: JobProgressDict(uuid=row.uuid, state=row.state,
                                         total_hosts=row.total_hosts, hosts_reported=0,
                                         counts=dict.fromkeys(STORED_STATES, 0))
                 for row in rows}
        result = models.CacheJobResult
        # A host only ``waiting`` (for a download slot) has not reported yet.
        for job_id, hosts in session.execute(
                select(result.job_id, func.count(result.host.distinct()))
                .where(result.job_id.in_(list(by_id)), result.state != WAITING)
                .group_by(result.job_id)):
            by_id[job_id]["hosts_reported"] = int(hosts)
        for job_id, state, count in session.execute(
                select(result.job_id, result.state, func.count())
                .where(result.job_id.in_(list(by_id))).group_by(result.job_id, result.state)):
            by_id[job_id]["counts"][state] = int(count)
        return list(by_id.values())


def job_count_by_state(db: Database) -> dict[str, int]:
    """How many jobs are in each state (states without a job are absent), in one query."""
    with db.transaction() as session:
        rows = session.execute(
            select(models.CacheJob.state, func.count()).group_by(models.CacheJob.state))
        return {state: int(count) for state, count in rows}


class PendingCatchUpDict(TypedDict):
    """A job that will cache images on a host when it comes back (its catch-up window)."""

    job_uuid: str
    aggregate_id: int
    image_ids: list[str]
    #: When the job's catch-up window closes (the host's pending images then end skipped).
    until: datetime.datetime | None


def pending_catch_ups(db: Database, host: str) -> list[PendingCatchUpDict]:
    """The unfinished jobs in which ``host`` is ``pending``, oldest first, in one query that
    reads only the results of unfinished jobs."""
    job, result = models.CacheJob, models.CacheJobResult
    with db.transaction() as session:
        rows = session.execute(
            select(job.id, job.uuid, job.aggregate_id, job.catch_up_until, result.image_id)
            .join(result, result.job_id == job.id)
            .where(job.state.in_(ACTIVE_STATES), result.host == host,
                   result.state == PENDING)
            .order_by(job.id, result.image_id)).all()
    by_job: dict[int, PendingCatchUpDict] = {}
    for row in rows:
        entry = by_job.setdefault(row.id, PendingCatchUpDict(
            job_uuid=row.uuid, aggregate_id=row.aggregate_id, image_ids=[],
            until=row.catch_up_until))
        entry["image_ids"].append(row.image_id)
    return list(by_job.values())
