"""Pre-cache jobs and their per-host, per-image results, on every backend."""

from __future__ import annotations

from typing import Any

import pytest

from fleetcache.common import exception
from fleetcache.common.db import job_leases, jobs, models
from fleetcache.common.db.jobs import ResultFields
from fleetcache.common.db.session import Database

pytestmark = pytest.mark.db
AGG_UUID = "8a1c6d1e-1111-4222-8333-944444444444"


def _job(db: Database, aggregate_id: int = 1, host: str | None = "cond-1") -> jobs.JobDict:
    return jobs.job_create(db, aggregate_id, AGG_UUID, ["img-a", "img-b"], 2, host)


def _result(state: str, reason: str | None = None, size: int = 0) -> ResultFields:
    return ResultFields(state=state, reason=reason, bytes_downloaded=size)


def test_create_is_queued(db: Database) -> None:
    job = _job(db)
    assert job["state"] == jobs.QUEUED
    assert job["image_ids"] == ["img-a", "img-b"]
    assert job["total_hosts"] == 2 and job["results"] == []
    assert job["started_at"] is None and job["finished_at"] is None
    assert jobs.job_get(db, job["uuid"]) == job


def test_states_stamp_times(db: Database) -> None:
    job = _job(db)
    jobs.job_set_state(db, job["uuid"], jobs.RUNNING)
    running = jobs.job_get(db, job["uuid"])
    assert running["state"] == jobs.RUNNING and running["started_at"] is not None
    jobs.job_set_state(db, job["uuid"], jobs.FAILED, error="boom")
    failed = jobs.job_get(db, job["uuid"])
    assert failed["finished_at"] is not None and failed["error"] == "boom"
    with pytest.raises(exception.InvalidInput):
        jobs.job_set_state(db, job["uuid"], "exploded")


def test_record_host_results_and_replace_them(db: Database) -> None:
    job = _job(db)
    jobs.job_record_hosts(db, job["uuid"], {"c1": {
        "img-a": _result("cached", size=1024), "img-b": _result("error", "disk full")}})
    jobs.job_record_hosts(db, job["uuid"], {"c2": {"img-a": _result("existing")},
                                            "c1": {"img-b": _result("cached", size=2048)}})
    results = {(r["host"], r["image_id"]): r for r in jobs.job_get(db, job["uuid"])["results"]}
    assert len(results) == 3
    assert results[("c1", "img-a")]["bytes_downloaded"] == 1024
    assert results[("c1", "img-b")]["state"] == "cached"
    assert results[("c1", "img-b")]["bytes_downloaded"] == 2048
    assert results[("c2", "img-a")]["state"] == "existing"
    with pytest.raises(exception.InvalidInput):
        jobs.job_record_hosts(db, job["uuid"], {"c3": {"img-a": _result("cached")},
                                                "c4": {"img-a": _result("weird")}})
    assert len(jobs.job_get(db, job["uuid"])["results"]) == 3  # nothing of that batch


def test_list_by_aggregate(db: Database) -> None:
    a, b = _job(db, aggregate_id=1), _job(db, aggregate_id=2)
    assert [j["uuid"] for j in jobs.job_list(db)] == [a["uuid"], b["uuid"]]
    assert [j["uuid"] for j in jobs.job_list(db, aggregate_id=2)] == [b["uuid"]]


def test_not_found(db: Database) -> None:
    with pytest.raises(exception.JobNotFound):
        jobs.job_get(db, "no-such-job")
    with pytest.raises(exception.JobNotFound):
        jobs.job_set_state(db, "no-such-job", jobs.DONE)


def test_running_again_keeps_started_at(db: Database) -> None:
    """A job taken over runs again: its start time stays the first conductor's."""
    job = _job(db)
    jobs.job_set_state(db, job["uuid"], jobs.RUNNING)
    first = jobs.job_get(db, job["uuid"])["started_at"]
    jobs.job_set_state(db, job["uuid"], jobs.RUNNING)
    assert jobs.job_get(db, job["uuid"])["started_at"] == first


def test_state_changes_build_no_result_rows(db: Database, rows_built: Any) -> None:
    job = jobs.job_create(db, 1, AGG_UUID, ["img-a"], 3, "cond-1", hosts=["c1", "c2", "c3"])
    jobs.job_record_hosts(db, job["uuid"], {h: {"img-a": _result("existing")}
                                            for h in ("c1", "c2", "c3")})
    with rows_built(models.CacheJobResult) as built:
        jobs.job_set_state(db, job["uuid"], jobs.RUNNING)
        assert job_leases.job_end_first_pass(db, job["uuid"]) == jobs.DONE
        assert job_leases.count_results(db, job["uuid"]) == 3
    assert built == []
    whole = jobs.job_get(db, job["uuid"])  # reading the job still gives all of it
    assert whole["state"] == jobs.DONE and whole["hosts"] == ["c1", "c2", "c3"]
    assert sorted(r["host"] for r in whole["results"]) == ["c1", "c2", "c3"]


def test_get_with_one_hosts_results_builds_only_its_rows(db: Database, rows_built: Any) -> None:
    job = jobs.job_create(db, 1, AGG_UUID, ["img-a", "img-b"], 3, "cond-1",
                          hosts=["c1", "c2", "c3"])
    jobs.job_record_hosts(db, job["uuid"], {h: {"img-a": _result("existing"),
                                                "img-b": _result(jobs.PENDING, "down")}
                                            for h in ("c1", "c2", "c3")})
    with rows_built(models.CacheJobResult) as built:
        one = jobs.job_get(db, job["uuid"], results_of="c2")
    assert len(built) == 2
    assert [(r["host"], r["image_id"], r["state"]) for r in one["results"]] == [
        ("c2", "img-a", "existing"), ("c2", "img-b", jobs.PENDING)]
    whole = jobs.job_get(db, job["uuid"])
    assert {k: v for k, v in one.items() if k != "results"} == {
        k: v for k, v in whole.items() if k != "results"}


def test_batches_of_any_size_look_up_their_rows_in_few_statement_texts(
        db: Database, sql_texts: list[str]) -> None:
    """A job writes batches of 1 to 200 hosts; one text per size filled SQLite's statement
    cache (128 per connection) with statements of up to 200 parameters."""
    job = _job(db)
    hosts = [f"h{n:03d}" for n in range(40 * 41 // 2)]
    start = 0
    for size in range(1, 41):
        batch = hosts[start:start + size]
        start += size
        jobs.job_record_hosts(db, job["uuid"], {h: {"img-a": _result("existing")} for h in batch})
    jobs.job_record_hosts(db, job["uuid"], {h: {"img-a": _result("cached")} for h in hosts[:3]})

    lookups = {t for t in sql_texts if "cache_job_results.host IN" in t}
    assert len(lookups) <= 7  # 1, 2, 4, ..., 64 hosts
    results = {r["host"]: r["state"] for r in jobs.job_get(db, job["uuid"])["results"]}
    assert len(results) == len(hosts)
    assert [results[h] for h in hosts[:4]] == ["cached", "cached", "cached", "existing"]
