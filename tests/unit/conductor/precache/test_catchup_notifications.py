"""Catch-up and takeover as the first pass behaves: a caught-up host sends its progress
notification, gets the job's pin and waits for a download slot of the image service, and a job
taken over sends no second start (conductor/precache/catchup.py, conductor/precache/takeover.py)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.common.context import get_admin_context
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import download_leases, jobs
from fleetcache.common.db import services as db_services
from fleetcache.common.db.models import utcnow
from fleetcache.common.db.session import Database
from fleetcache.conductor.precache import notifications
from fleetcache.conductor.precache.catchup import CatchUp
from fleetcache.conductor.precache.origin import DownloadGate
from fleetcache.conductor.precache.ownership import JobOwner
from fleetcache.conductor.precache.precacher import Precacher
from fleetcache.conductor.precache.takeover import JobTakeover
from tests.unit.conductor.precache.test_catchup_takeover import wait_job_state
from tests.unit.conductor.precache.test_job import (
    IMG_A,
    IMG_B,
    FakeComputes,
    FakeImages,
    FakeNotifier,
    Pools,
    make_aggregate,
    service_id,
)

OWNER = JobOwner(host="conductor1", owner="conductor1:one", lease_time=30,
                 catch_up_window=600)


class PinComputes(FakeComputes):
    """Fake computes that also record the pin each call carried (compute RPC 1.2)."""

    def __init__(self) -> None:
        super().__init__()
        self.pins: list[tuple[str, float | None]] = []

    def cache_images(self, ctxt: Any, host: str, image_ids: list[str],
                     pin_until: float | None = None) -> Any:
        self.pins.append((host, pin_until))
        return super().cache_images(ctxt, host, image_ids)


@pytest.fixture
def pools() -> Iterator[Pools]:
    made = Pools()
    yield made
    made.shutdown()


def _precacher(conf: cfg.ConfigOpts, db: Database, computes: FakeComputes, pools: Pools,
               notifier: FakeNotifier, gate: DownloadGate | None = None) -> Precacher:
    return Precacher(
        conf, db, OWNER.host, clients=computes, images=FakeImages(),  # type: ignore[arg-type]
        notifier=notifications.CacheNotifier(notifier), host_calls=pools.host_calls(2),
        job_runner=lambda f: f(), owner=OWNER, gate=gate)


def test_caught_up_host_sends_its_progress_with_the_next_index(conf, db, pools):
    agg_id = make_aggregate(db, ["up1", "up2", "down"])
    db_services.service_update(db, service_id(db, "down"), forced_down=True)
    computes, notifier = PinComputes(), FakeNotifier()
    precacher = _precacher(conf, db, computes, pools, notifier)
    job = precacher.start(get_admin_context(), agg_id, [IMG_A, IMG_B])
    first_pass = notifier.events(notifications.PROGRESS)
    assert sorted(p["host"] for p in first_pass) == ["down", "up1", "up2"]
    assert [p["images_failed"] for p in first_pass if p["host"] == "down"] == [[IMG_A, IMG_B]]

    db_services.service_update(db, service_id(db, "down"), forced_down=False)
    CatchUp(precacher, OWNER).sweep()
    wait_job_state(db, job["uuid"], jobs.DONE)
    caught_up = notifier.events(notifications.PROGRESS)[len(first_pass):]
    agg = db_aggregates.aggregate_get(db, agg_id)
    assert caught_up == [{
        "id": agg_id, "uuid": agg["uuid"], "name": agg["name"], "host": "down",
        "images_cached": sorted([IMG_A, IMG_B]), "images_failed": [], "index": 3, "total": 3,
        "job_uuid": job["uuid"]}]


def test_catch_up_pins_as_the_job_asked_while_the_pin_lasts(conf, db, pools):
    agg_id = make_aggregate(db, ["up", "down"])
    db_services.service_update(db, service_id(db, "down"), forced_down=True)
    computes = PinComputes()
    precacher = _precacher(conf, db, computes, pools, FakeNotifier())
    job = precacher.start(get_admin_context(), agg_id, [IMG_A], pin_seconds=3600)
    pin_until = jobs.job_get(db, job["uuid"])["pin_until"]
    assert pin_until is not None
    db_services.service_update(db, service_id(db, "down"), forced_down=False)
    CatchUp(precacher, OWNER).sweep()
    wait_job_state(db, job["uuid"], jobs.DONE)
    expected = pin_until.replace(tzinfo=datetime.UTC).timestamp()
    assert computes.pins == [("up", expected), ("down", expected)]


def test_catch_up_after_the_pin_ended_asks_without_one(conf, db, pools):
    agg_id = make_aggregate(db, ["down"])
    aggregate = db_aggregates.aggregate_get(db, agg_id)
    job = jobs.job_create(db, agg_id, aggregate["uuid"], [IMG_A], 1, OWNER.host,
                          pin_until=utcnow() - datetime.timedelta(seconds=1), hosts=["down"],
                          owner=OWNER.owner, lease_expires_at=OWNER.lease_until(),
                          catch_up_until=OWNER.catch_up_until())
    jobs.job_record_hosts(db, job["uuid"], {"down": {IMG_A: {
        "state": "pending", "reason": "down", "bytes_downloaded": 0}}})
    jobs.job_set_state(db, job["uuid"], jobs.CATCHING_UP)
    computes = PinComputes()
    CatchUp(_precacher(conf, db, computes, pools, FakeNotifier()), OWNER).sweep()
    wait_job_state(db, job["uuid"], jobs.DONE)
    assert computes.pins == [("down", None)]


@pytest.mark.parametrize(("state", "starts"), [(jobs.RUNNING, 0), (jobs.QUEUED, 1)])
def test_job_taken_over_sends_start_only_if_its_first_conductor_did_not(conf, db, pools,
                                                                       state, starts):
    agg_id = make_aggregate(db, ["h1", "h2"])
    aggregate = db_aggregates.aggregate_get(db, agg_id)
    job = jobs.job_create(db, agg_id, aggregate["uuid"], [IMG_A], 2, "conductor0",
                          hosts=["h1", "h2"], owner="conductor0:dead",
                          lease_expires_at=utcnow() - datetime.timedelta(seconds=1))
    if state == jobs.RUNNING:
        jobs.job_set_state(db, job["uuid"], jobs.RUNNING)
        jobs.job_record_hosts(db, job["uuid"], {"h1": {IMG_A: {
            "state": "cached", "reason": None, "bytes_downloaded": 10}}})
    notifier = FakeNotifier()
    takeover = JobTakeover(_precacher(conf, db, PinComputes(), pools, notifier), OWNER)
    assert takeover.claim() == [job["uuid"]]
    wait_job_state(db, job["uuid"], jobs.DONE)
    events = [e for e, _ in notifier.sent]
    assert events.count(notifications.START) == starts
    assert events[-1] == notifications.END and events.count(notifications.END) == 1
    progress = notifier.events(notifications.PROGRESS)
    # the two hosts are asked side by side: their progress comes in the order they answer
    expected = ["h2"] if state == jobs.RUNNING else ["h1", "h2"]
    assert sorted(p["host"] for p in progress) == expected
    assert progress[-1]["index"] == 2


def test_catch_up_waits_for_a_download_slot_and_the_host_stays_pending(conf, db, pools):
    agg_id = make_aggregate(db, ["down"])
    db_services.service_update(db, service_id(db, "down"), forced_down=True)
    gate = DownloadGate(db, "conductor1/1", download_leases.Limits(per_image=1), 30)
    computes = PinComputes()
    try:
        precacher = _precacher(conf, db, computes, pools, FakeNotifier(), gate)
        job = precacher.start(get_admin_context(), agg_id, [IMG_A])
        other = download_leases.lease_acquire(db, "conductor2/2", "elsewhere", IMG_A,
                                              gate.limits, 30)
        assert other.lease_id is not None
        db_services.service_update(db, service_id(db, "down"), forced_down=False)
        CatchUp(precacher, OWNER).sweep()
        time.sleep(1.0)  # the slot is taken: the host is not called, and stays pending
        assert computes.calls == []
        held = jobs.job_get(db, job["uuid"])
        assert held["state"] == jobs.CATCHING_UP
        assert [r["state"] for r in held["results"]] == [jobs.PENDING]
        download_leases.lease_release(db, other.lease_id)
        wait_job_state(db, job["uuid"], jobs.DONE)
        assert computes.calls == [("down", [IMG_A])]
        assert download_leases.leases_list(db) == []
    finally:
        gate.stop()
