"""Job leases (claimed by exactly one conductor) and the catch-up state machine, on SQLite,
PostgreSQL and MariaDB."""

from __future__ import annotations

import concurrent.futures
import datetime
import threading

import pytest

from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import job_leases, jobs
from fleetcache.common.db import services as db_services
from fleetcache.common.db.jobs import ResultFields
from fleetcache.common.db.models import utcnow
from fleetcache.common.db.session import Database

pytestmark = pytest.mark.db
AGG_UUID = "8a1c6d1e-1111-4222-8333-944444444444"
HOUR = datetime.timedelta(hours=1)


def _job(db: Database, owner: str | None = "c1:a", lease: datetime.timedelta = HOUR,
         host: str = "c1", window: datetime.timedelta | None = HOUR,
         aggregate_id: int = 1) -> jobs.JobDict:
    now = utcnow()
    return jobs.job_create(db, aggregate_id, AGG_UUID, ["img-a", "img-b"], 2, host,
                           hosts=["h1", "h2"], owner=owner, lease_expires_at=now + lease,
                           catch_up_until=now + window if window is not None else None)


def _result(state: str, reason: str | None = None) -> dict[str, ResultFields]:
    return {i: ResultFields(state=state, reason=reason, bytes_downloaded=0)
            for i in ("img-a", "img-b")}


def test_create_stores_owner_lease_hosts_and_window(db: Database) -> None:
    job = _job(db)
    stored = jobs.job_get(db, job["uuid"])
    assert stored["owner"] == "c1:a" and stored["hosts"] == ["h1", "h2"]
    assert stored["lease_expires_at"] > utcnow() and stored["catch_up_until"] is not None


def test_live_lease_is_not_claimable_expired_one_is(db: Database) -> None:
    live = _job(db)
    expired = _job(db, owner="c2:b", host="c2", lease=-datetime.timedelta(seconds=1))
    found = job_leases.jobs_claimable(db, utcnow(), owner="c3:c")
    assert [lease.job_uuid for lease in found] == [expired["uuid"]]
    assert live["uuid"] not in {lease.job_uuid for lease in found}


def test_own_host_previous_process_jobs_are_claimable_at_once(db: Database) -> None:
    mine = _job(db, owner="c1:old", host="c1")
    _job(db, owner="c2:live", host="c2")
    found = job_leases.jobs_claimable(db, utcnow(), owner="c1:new", host="c1")
    assert [lease.job_uuid for lease in found] == [mine["uuid"]]


def test_finished_jobs_are_never_claimed(db: Database) -> None:
    job = _job(db, lease=-HOUR)
    jobs.job_set_state(db, job["uuid"], jobs.DONE)
    assert job_leases.jobs_claimable(db, utcnow(), owner="c3:c") == []


def test_claim_is_won_by_exactly_one_of_many_conductors(db: Database) -> None:
    job = _job(db, lease=-datetime.timedelta(seconds=1))
    [seen] = job_leases.jobs_claimable(db, utcnow(), owner="x")
    barrier = threading.Barrier(6)

    def claim(n: int) -> bool:
        barrier.wait()
        return job_leases.job_claim(db, seen, f"c{n}:x", f"c{n}", utcnow() + HOUR)

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        won = list(pool.map(claim, range(6)))
    assert won.count(True) == 1, won
    winner = won.index(True)
    stored = jobs.job_get(db, job["uuid"])
    assert stored["owner"] == f"c{winner}:x" and stored["conductor_host"] == f"c{winner}"


def test_claim_fails_when_the_owner_renewed_in_between(db: Database) -> None:
    job = _job(db, lease=-datetime.timedelta(seconds=1))
    [seen] = job_leases.jobs_claimable(db, utcnow(), owner="c9:x")
    assert job_leases.jobs_renew(db, "c1:a", utcnow() + HOUR) == {job["uuid"]}
    assert not job_leases.job_claim(db, seen, "c9:x", "c9", utcnow() + HOUR)
    assert jobs.job_get(db, job["uuid"])["owner"] == "c1:a"


def test_renew_extends_only_the_owners_unfinished_jobs(db: Database) -> None:
    mine, done = _job(db, lease=datetime.timedelta(seconds=5)), _job(db)
    other = _job(db, owner="c2:b", lease=datetime.timedelta(seconds=5))
    jobs.job_set_state(db, done["uuid"], jobs.DONE)
    until = utcnow() + 2 * HOUR
    assert job_leases.jobs_renew(db, "c1:a", until) == {mine["uuid"]}
    assert jobs.job_get(db, mine["uuid"])["lease_expires_at"] == until
    assert jobs.job_get(db, other["uuid"])["lease_expires_at"] < until


def test_release_makes_the_job_claimable_at_once(db: Database) -> None:
    job = _job(db)
    assert job_leases.job_release(db, job["uuid"], "c1:a")
    assert [s.job_uuid for s in job_leases.jobs_claimable(db, utcnow(), "c2:b")] == [
        job["uuid"]]
    assert not job_leases.job_release(db, job["uuid"], "c2:b")  # not its owner


def test_unfinished_hosts_are_those_without_any_result(db: Database) -> None:
    job = _job(db)
    assert job_leases.job_unfinished_hosts(db, job["uuid"], []) == ["h1", "h2"]
    jobs.job_record_hosts(db, job["uuid"], {"h1": _result("cached")})
    assert job_leases.job_unfinished_hosts(db, job["uuid"], []) == ["h2"]
    jobs.job_record_hosts(db, job["uuid"], {"h2": _result(jobs.PENDING, "down")})
    assert job_leases.job_unfinished_hosts(db, job["uuid"], []) == []


def test_first_pass_ends_catching_up_while_a_host_is_pending_then_done(db: Database) -> None:
    job = _job(db)
    jobs.job_record_hosts(db, job["uuid"], {"h1": _result("cached"),
                                            "h2": _result(jobs.PENDING, "down")})
    assert job_leases.job_end_first_pass(db, job["uuid"]) == jobs.CATCHING_UP
    stored = jobs.job_get(db, job["uuid"])
    assert stored["state"] == jobs.CATCHING_UP and stored["finished_at"] is None
    assert not job_leases.job_finish_if_caught_up(db, job["uuid"])
    assert job_leases.pending_by_job(db, "c1:a") == {
        job["uuid"]: {"h2": {"img-a": "down", "img-b": "down"}}}

    jobs.job_record_hosts(db, job["uuid"], {"h2": _result("cached")})
    assert job_leases.job_finish_if_caught_up(db, job["uuid"])
    stored = jobs.job_get(db, job["uuid"])
    assert stored["state"] == jobs.DONE and stored["finished_at"] is not None
    assert job_leases.count_results(db, job["uuid"]) == 4


def test_first_pass_without_pending_is_done_and_with_error_failed(db: Database) -> None:
    ok, broken = _job(db), _job(db)
    assert job_leases.job_end_first_pass(db, ok["uuid"]) == jobs.DONE
    assert job_leases.job_end_first_pass(db, broken["uuid"], error="boom") == jobs.FAILED
    assert jobs.job_get(db, broken["uuid"])["error"] == "boom"


def test_window_close_skips_pending_hosts_saying_why(db: Database) -> None:
    job = _job(db)
    jobs.job_record_hosts(db, job["uuid"], {"h1": _result("cached"),
                                            "h2": _result(jobs.PENDING, "disabled")})
    job_leases.job_end_first_pass(db, job["uuid"])
    assert job_leases.job_close_window(db, job["uuid"], utcnow()) == 2
    stored = jobs.job_get(db, job["uuid"])
    assert stored["state"] == jobs.DONE
    h2 = [r for r in stored["results"] if r["host"] == "h2"]
    assert {r["state"] for r in h2} == {"skipped"}
    assert all(r["reason"].startswith("disabled; catch-up window closed at ") for r in h2)


def test_host_added_is_pending_in_open_jobs_of_its_aggregates_only(db: Database) -> None:
    for host in ("h1", "h3"):
        db_services.service_register(db, host, "fleetcache-compute", "compute", None, {})
    agg = db_aggregates.aggregate_create(db, "a1")
    other = db_aggregates.aggregate_create(db, "a2")
    db_aggregates.aggregate_add_host(db, agg["id"], "h3")
    open_job = _job(db, aggregate_id=agg["id"])
    no_window = _job(db, aggregate_id=agg["id"], window=None)
    closed = _job(db, aggregate_id=agg["id"], window=-HOUR)
    elsewhere = _job(db, aggregate_id=other["id"])
    finished = _job(db, aggregate_id=agg["id"])
    jobs.job_set_state(db, finished["uuid"], jobs.DONE)

    assert job_leases.jobs_add_host(db, "h3", utcnow()) == [open_job["uuid"]]
    stored = jobs.job_get(db, open_job["uuid"])
    assert stored["total_hosts"] == 3
    assert {(r["host"], r["state"], r["reason"]) for r in stored["results"]} == {
        ("h3", jobs.PENDING, job_leases.ADDED_REASON)}
    for untouched in (no_window, closed, elsewhere, finished):
        assert jobs.job_get(db, untouched["uuid"])["results"] == []
    assert job_leases.jobs_add_host(db, "h3", utcnow()) == []  # once only
    db_aggregates.aggregate_add_host(db, agg["id"], "h1")  # a host the job already has
    assert job_leases.jobs_add_host(db, "h1", utcnow()) == []


def test_a_conductor_that_lost_its_job_cannot_end_it(db: Database) -> None:
    job = _job(db, lease=-datetime.timedelta(seconds=1))
    [seen] = job_leases.jobs_claimable(db, utcnow(), owner="c2:b")
    assert job_leases.job_claim(db, seen, "c2:b", "c2", utcnow() + HOUR)
    assert job_leases.job_end_first_pass(db, job["uuid"], owner="c1:a") == jobs.QUEUED
    assert job_leases.job_end_first_pass(db, job["uuid"], owner="c2:b") == jobs.DONE
