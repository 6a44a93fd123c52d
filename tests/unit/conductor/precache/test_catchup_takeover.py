"""Unit tests of catch-up (conductor/precache/catchup.py) and takeover (precache/takeover.py)
with fake computes on SQLite: the job state machine ``running -> catching_up -> done``,
pending hosts asked when back, the window's end, hosts added later, and a takeover that asks
only the hosts without a stored result."""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.common.context import RequestContext, get_admin_context
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import job_leases, jobs, models
from fleetcache.common.db import services as db_services
from fleetcache.common.db.models import utcnow
from fleetcache.common.db.session import Database
from fleetcache.conductor.precache import notifications
from fleetcache.conductor.precache.catchup import REMOVED_REASON, CatchUp
from fleetcache.conductor.precache.ownership import JobOwner
from fleetcache.conductor.precache.precacher import Precacher
from fleetcache.conductor.precache.takeover import JobTakeover
from tests.unit.conductor.precache.test_job import (
    IMG_A,
    IMG_B,
    FakeComputes,
    FakeImages,
    Pools,
    make_aggregate,
    results_by_host,
    service_id,
)


@pytest.fixture
def pools() -> Iterator[Pools]:
    made = Pools()
    yield made
    made.shutdown()


def _ctxt() -> RequestContext:
    return get_admin_context()


OWNER = JobOwner(host="conductor1", owner="conductor1:one", lease_time=30,
                 catch_up_window=600)


def _precacher(conf: cfg.ConfigOpts, db: Database, computes: FakeComputes, pools: Pools,
               owner: JobOwner = OWNER) -> Precacher:
    return Precacher(
        conf, db, owner.host, clients=computes, images=FakeImages(),  # type: ignore[arg-type]
        notifier=notifications.CacheNotifier(None), host_calls=pools.host_calls(2),
        job_runner=lambda f: f(), owner=owner)


def wait_job_state(db: Database, job_uuid: str, state: str,
                   timeout: float = 10) -> jobs.JobDict:
    """The job once it reaches ``state`` (a catch-up ends on another thread)."""
    deadline = time.monotonic() + timeout
    while True:
        job = jobs.job_get(db, job_uuid)
        if job["state"] == state:
            return job
        assert time.monotonic() < deadline, f"job still {job['state']}, not {state}"
        time.sleep(0.02)


def test_down_host_is_pending_then_caught_up_when_its_heartbeat_arrives(conf, db, pools):
    agg_id = make_aggregate(db, ["up", "down"])
    db_services.service_update(db, service_id(db, "down"), forced_down=True)
    computes = FakeComputes()
    precacher = _precacher(conf, db, computes, pools)
    job = precacher.start(_ctxt(), agg_id, [IMG_A, IMG_B])
    stored = jobs.job_get(db, job["uuid"])
    assert stored["state"] == jobs.CATCHING_UP and stored["finished_at"] is None
    assert results_by_host(db, job["uuid"])["down"] == {IMG_A: ("pending", "down"),
                                                        IMG_B: ("pending", "down")}
    catch_up = CatchUp(precacher, OWNER)
    catch_up.sweep()  # still down: nobody asked
    assert [h for h, _ in computes.calls] == ["up"]

    db_services.service_update(db, service_id(db, "down"), forced_down=False)
    catch_up.host_seen(db_services.service_heartbeat(db, "down", "fleetcache-compute"))
    done = wait_job_state(db, job["uuid"], jobs.DONE)
    assert computes.calls[-1] == ("down", [IMG_A, IMG_B])
    assert results_by_host(db, job["uuid"])["down"] == {IMG_A: ("cached", None),
                                                        IMG_B: ("cached", None)}
    assert done["finished_at"] is not None
    assert job_leases.count_results(db, job["uuid"]) == 4


def test_disabled_host_is_asked_by_the_sweep_once_enabled(conf, db, pools):
    agg_id = make_aggregate(db, ["up", "off"])
    db_services.service_update(db, service_id(db, "off"), disabled=True)
    computes = FakeComputes()
    precacher = _precacher(conf, db, computes, pools)
    job = precacher.start(_ctxt(), agg_id, [IMG_A])
    assert results_by_host(db, job["uuid"])["off"] == {IMG_A: ("pending", "disabled")}
    db_services.service_update(db, service_id(db, "off"), disabled=False)
    CatchUp(precacher, OWNER).sweep()
    wait_job_state(db, job["uuid"], jobs.DONE)
    assert results_by_host(db, job["uuid"])["off"] == {IMG_A: ("cached", None)}


def test_without_a_window_down_hosts_are_skipped_as_nova(conf, db, pools):
    agg_id = make_aggregate(db, ["up", "down"])
    db_services.service_update(db, service_id(db, "down"), forced_down=True)
    owner = dataclasses.replace(OWNER, catch_up_window=0)
    job = _precacher(conf, db, FakeComputes(), pools, owner).start(_ctxt(), agg_id, [IMG_A])
    assert jobs.job_get(db, job["uuid"])["state"] == jobs.DONE
    assert results_by_host(db, job["uuid"])["down"] == {IMG_A: ("skipped", "down")}


def test_window_closing_ends_the_job_with_pending_hosts_skipped(conf, db, pools):
    agg_id = make_aggregate(db, ["up", "down"])
    db_services.service_update(db, service_id(db, "down"), forced_down=True)
    owner = dataclasses.replace(OWNER, catch_up_window=0.2)
    precacher = _precacher(conf, db, FakeComputes(), pools, owner)
    job = precacher.start(_ctxt(), agg_id, [IMG_A])
    assert jobs.job_get(db, job["uuid"])["state"] == jobs.CATCHING_UP
    time.sleep(0.3)
    CatchUp(precacher, owner).sweep()
    stored = jobs.job_get(db, job["uuid"])
    assert stored["state"] == jobs.DONE
    state, reason = results_by_host(db, job["uuid"])["down"][IMG_A]
    assert state == "skipped" and reason.startswith("down; catch-up window closed at ")


def test_host_added_to_the_aggregate_during_the_window_is_caught_up(conf, db, pools):
    agg_id = make_aggregate(db, ["up", "down"])
    db_services.service_update(db, service_id(db, "down"), forced_down=True)
    computes = FakeComputes()
    precacher = _precacher(conf, db, computes, pools)
    job = precacher.start(_ctxt(), agg_id, [IMG_A])
    db_services.service_register(db, "new", "fleetcache-compute", "compute", None)
    db_aggregates.aggregate_add_host(db, agg_id, "new")
    catch_up = CatchUp(precacher, OWNER)
    assert catch_up.host_added("new") == [job["uuid"]]
    assert results_by_host(db, job["uuid"])["new"] == {
        IMG_A: ("pending", job_leases.ADDED_REASON)}
    catch_up.sweep()
    deadline = time.monotonic() + 10
    while results_by_host(db, job["uuid"])["new"][IMG_A][0] != "cached":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    stored = jobs.job_get(db, job["uuid"])
    assert stored["state"] == jobs.CATCHING_UP and stored["total_hosts"] == 3  # "down" waits


def test_pending_host_removed_from_the_aggregate_ends_skipped(conf, db, pools):
    agg_id = make_aggregate(db, ["up", "down"])
    db_services.service_update(db, service_id(db, "down"), forced_down=True)
    computes = FakeComputes()
    precacher = _precacher(conf, db, computes, pools)
    job = precacher.start(_ctxt(), agg_id, [IMG_A])
    db_aggregates.aggregate_remove_host(db, agg_id, "down")
    db_services.service_update(db, service_id(db, "down"), forced_down=False)
    CatchUp(precacher, OWNER).sweep()
    wait_job_state(db, job["uuid"], jobs.DONE)
    assert results_by_host(db, job["uuid"])["down"] == {IMG_A: ("skipped", REMOVED_REASON)}
    assert [h for h, _ in computes.calls] == ["up"]


def _reborn(db: Database, agg_id: int, hosts: list[str]) -> None:
    """Delete aggregate ``agg_id`` and create another under the same id (SQLite, and MySQL
    before 8 after a restart, reuse the highest id) holding ``hosts``."""
    for host in db_aggregates.aggregate_get(db, agg_id)["hosts"]:
        db_aggregates.aggregate_remove_host(db, agg_id, host)
    db_aggregates.aggregate_delete(db, agg_id)
    with db.transaction() as session:
        session.add(models.Aggregate(id=agg_id, uuid="reborn-uuid", name="reborn"))
    for host in hosts:
        db_aggregates.aggregate_add_host(db, agg_id, host)


def test_pending_host_of_a_reborn_aggregate_id_is_not_asked(conf, db, pools):
    """The job's aggregate was deleted and its id reused by another holding the same host:
    catch-up ends the host as removed instead of caching the old job's images there."""
    agg_id = make_aggregate(db, ["up", "down"])
    db_services.service_update(db, service_id(db, "down"), forced_down=True)
    computes = FakeComputes()
    precacher = _precacher(conf, db, computes, pools)
    job = precacher.start(_ctxt(), agg_id, [IMG_A])
    _reborn(db, agg_id, ["down"])
    db_services.service_update(db, service_id(db, "down"), forced_down=False)
    CatchUp(precacher, OWNER).sweep()
    wait_job_state(db, job["uuid"], jobs.DONE)
    assert results_by_host(db, job["uuid"])["down"] == {IMG_A: ("skipped", REMOVED_REASON)}
    assert [h for h, _ in computes.calls] == ["up"]


def test_takeover_of_a_job_whose_aggregate_id_was_reused_asks_no_one(conf, db, pools):
    agg_id = make_aggregate(db, ["h1", "h2"])
    aggregate = db_aggregates.aggregate_get(db, agg_id)
    dead = dataclasses.replace(OWNER, owner="conductor0:dead", host="conductor0")
    job = jobs.job_create(db, agg_id, aggregate["uuid"], [IMG_A], 2, "conductor0",
                          hosts=["h1", "h2"], owner=dead.owner,
                          lease_expires_at=utcnow() - datetime.timedelta(seconds=1))
    jobs.job_set_state(db, job["uuid"], jobs.RUNNING)
    _reborn(db, agg_id, ["h1", "h2"])

    computes = FakeComputes()
    assert JobTakeover(_precacher(conf, db, computes, pools), OWNER).claim() == [job["uuid"]]
    ended = wait_job_state(db, job["uuid"], jobs.FAILED)
    assert "deleted" in (ended["error"] or "")
    assert computes.calls == []


def test_takeover_asks_only_the_hosts_without_a_stored_result(conf, db, pools):
    """A conductor died after storing h1's results (h2's were in its unflushed batch, h3 not
    asked yet): the next owner asks h2 and h3 only, and every host has one result per image."""
    agg_id = make_aggregate(db, ["h1", "h2", "h3"])
    aggregate = db_aggregates.aggregate_get(db, agg_id)
    dead = dataclasses.replace(OWNER, owner="conductor0:dead", host="conductor0")
    job = jobs.job_create(db, agg_id, aggregate["uuid"], [IMG_A], 3, "conductor0",
                          hosts=["h1", "h2", "h3"], owner=dead.owner,
                          lease_expires_at=utcnow() - datetime.timedelta(seconds=1),
                          catch_up_until=dead.catch_up_until())
    jobs.job_set_state(db, job["uuid"], jobs.RUNNING)
    jobs.job_record_hosts(db, job["uuid"], {"h1": {IMG_A: {
        "state": "cached", "reason": None, "bytes_downloaded": 10}}})
    started_at = jobs.job_get(db, job["uuid"])["started_at"]

    computes = FakeComputes()
    takeover = JobTakeover(_precacher(conf, db, computes, pools), OWNER)
    assert takeover.claim() == [job["uuid"]]
    done = wait_job_state(db, job["uuid"], jobs.DONE)
    assert sorted(h for h, _ in computes.calls) == ["h2", "h3"]
    assert done["owner"] == OWNER.owner and done["conductor_host"] == OWNER.host
    assert done["started_at"] == started_at
    assert job_leases.count_results(db, job["uuid"]) == 3
    assert takeover.claim() == []  # finished: nothing left to claim


def test_renew_keeps_a_live_owners_job_from_being_claimed(conf, db, pools):
    agg_id = make_aggregate(db, ["h1"])
    computes = FakeComputes()
    mine = JobTakeover(_precacher(conf, db, computes, pools), OWNER)
    aggregate = db_aggregates.aggregate_get(db, agg_id)
    job = jobs.job_create(db, agg_id, aggregate["uuid"], [IMG_A], 1, OWNER.host,
                          hosts=["h1"], owner=OWNER.owner,
                          lease_expires_at=utcnow() - datetime.timedelta(seconds=1))
    mine.renew()
    other = dataclasses.replace(OWNER, owner="conductor2:x", host="conductor2")
    theirs = JobTakeover(_precacher(conf, db, computes, pools, other), other)
    assert theirs.claim() == []
    assert jobs.job_get(db, job["uuid"])["owner"] == OWNER.owner
    assert computes.calls == []


def test_catch_up_call_that_fails_leaves_the_host_pending_for_the_next_sweep(conf, db, pools):
    agg_id = make_aggregate(db, ["up", "down"])
    db_services.service_update(db, service_id(db, "down"), forced_down=True)
    failing = {"down": _raise(TimeoutError("no answer"))}
    computes = FakeComputes(failing)
    precacher = _precacher(conf, db, computes, pools)
    job = precacher.start(_ctxt(), agg_id, [IMG_A])
    db_services.service_update(db, service_id(db, "down"), forced_down=False)
    catch_up = CatchUp(precacher, OWNER)
    catch_up.sweep()
    deadline = time.monotonic() + 10
    while ("down", [IMG_A]) not in computes.calls:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.2)
    assert results_by_host(db, job["uuid"])["down"] == {IMG_A: ("pending", "down")}
    del computes.behaviour["down"]
    catch_up.sweep()
    wait_job_state(db, job["uuid"], jobs.DONE)
    assert results_by_host(db, job["uuid"])["down"] == {IMG_A: ("cached", None)}


def _raise(exc: Exception) -> Any:
    def fail(image_ids: list[str]) -> Any:
        raise exc

    return fail
