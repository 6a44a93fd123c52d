"""What a host waits for, on every backend: the unfinished jobs in which it is ``pending``
(``GET /os-hosts/{host}/image-cache``), and how many of a job's hosts have their outcome (the
index of a caught-up host's progress notification)."""

from __future__ import annotations

import datetime

import pytest

from fleetcache.common.db import job_leases, jobs
from fleetcache.common.db.jobs import ResultFields
from fleetcache.common.db.session import Database

pytestmark = pytest.mark.db
AGG_UUID = "8a1c6d1e-1111-4222-8333-944444444444"
UNTIL = datetime.datetime(2026, 11, 25, 19, 0, 0, 123456)


def _result(state: str, reason: str | None = None) -> ResultFields:
    return ResultFields(state=state, reason=reason, bytes_downloaded=0)


def _job(db: Database, image_ids: list[str], hosts: dict[str, dict[str, str]],
         state: str = jobs.CATCHING_UP) -> jobs.JobDict:
    job = jobs.job_create(db, 3, AGG_UUID, image_ids, len(hosts), "cond-1",
                          catch_up_until=UNTIL)
    jobs.job_record_hosts(db, job["uuid"], {
        host: {i: _result(s, "down" if s == jobs.PENDING else None) for i, s in by_image.items()}
        for host, by_image in hosts.items()})
    jobs.job_set_state(db, job["uuid"], state)
    return job


def test_pending_catch_ups_of_a_host_name_its_unfinished_jobs_only(db: Database) -> None:
    first = _job(db, ["img-a", "img-b"], {"h1": {"img-a": "pending", "img-b": "pending"},
                                           "h2": {"img-a": "cached", "img-b": "cached"}})
    second = _job(db, ["img-c"], {"h1": {"img-c": "pending"}, "h2": {"img-c": "pending"}},
                  state=jobs.RUNNING)
    _job(db, ["img-d"], {"h1": {"img-d": "pending"}}, state=jobs.DONE)  # finished: not shown
    _job(db, ["img-e"], {"h1": {"img-e": "cached"}})  # h1 has its outcome there

    assert jobs.pending_catch_ups(db, "h1") == [
        {"job_uuid": first["uuid"], "aggregate_id": 3, "image_ids": ["img-a", "img-b"],
         "until": UNTIL},
        {"job_uuid": second["uuid"], "aggregate_id": 3, "image_ids": ["img-c"],
         "until": UNTIL},
    ]
    assert [p["job_uuid"] for p in jobs.pending_catch_ups(db, "h2")] == [second["uuid"]]
    assert jobs.pending_catch_ups(db, "h3") == []


def test_hosts_finished_leave_out_pending_and_waiting_hosts(db: Database) -> None:
    job = _job(db, ["img-a", "img-b"], {
        "done": {"img-a": "cached", "img-b": "error"},
        "half": {"img-a": "cached", "img-b": jobs.WAITING},
        "away": {"img-a": "pending", "img-b": "pending"},
        "also-done": {"img-a": "skipped", "img-b": "skipped"},
    }, state=jobs.RUNNING)
    assert job_leases.count_hosts_finished(db, job["uuid"]) == 2
    jobs.job_record_hosts(db, job["uuid"], {"away": {"img-a": _result("cached"),
                                                     "img-b": _result("cached")}})
    assert job_leases.count_hosts_finished(db, job["uuid"]) == 3
