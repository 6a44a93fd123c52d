"""Unit tests of origin protection (fleetcache.conductor.precache.origin) and of a pre-cache
job that runs under it, on SQLite with fake computes."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from fleetcache.common.db import download_leases, jobs
from fleetcache.common.db.download_leases import Limits
from fleetcache.common.db.session import Database
from fleetcache.conductor.precache import notifications
from fleetcache.conductor.precache.origin import DownloadGate, GateClosed
from fleetcache.conductor.precache.precacher import Precacher
from tests.unit.conductor.precache.test_job import (
    IMG_A,
    IMG_B,
    FakeComputes,
    FakeImages,
    Pools,
    _ctxt,
    make_aggregate,
    results_by_host,
    wait_done,
)


@pytest.fixture
def gates() -> Any:
    made: list[DownloadGate] = []

    def make(db: Database, limits: Limits, lease_seconds: float = 30,
             holder: str = "cond1") -> DownloadGate:
        gate = DownloadGate(db, holder, limits, lease_seconds)
        made.append(gate)
        return gate

    yield make
    for gate in made:
        gate.stop()


def test_without_limits_the_gate_takes_no_lease(db, gates):
    gate = gates(db, Limits())
    with gate.hold("h1", IMG_A):
        assert download_leases.leases_list(db) == []
    assert not gate.enabled


def test_a_lease_is_held_for_the_body_and_released_after(db, gates):
    gate = gates(db, Limits(per_image=1))
    with gate.hold("h1", IMG_A, "job-1"):
        (lease,) = download_leases.leases_list(db)
        assert (lease["holder"], lease["host"], lease["image_id"], lease["job_uuid"]) == (
            "cond1", "h1", IMG_A, "job-1")
    assert download_leases.leases_list(db) == []


def test_a_second_host_waits_is_told_once_and_goes_when_the_slot_frees(db, gates):
    first, second = gates(db, Limits(per_image=1)), gates(db, Limits(per_image=1), holder="c2")
    told: list[str] = []
    got = threading.Event()

    def wait_for_slot() -> None:
        with second.hold("h2", IMG_A, on_wait=told.append):
            got.set()

    with first.hold("h1", IMG_A):
        waiter = threading.Thread(target=wait_for_slot)
        waiter.start()
        time.sleep(1.0)  # several attempts, at 0.1 to 0.4 s
        assert not got.is_set()
        assert len(told) == 1 and "max_concurrent_downloads_per_image = 1" in told[0]
    waiter.join(5)
    assert got.is_set() and len(told) == 1


def test_stopping_ends_the_wait(db, gates):
    gate = gates(db, Limits(total=1))
    stopping = threading.Event()
    with gate.hold("h1", IMG_A):
        threading.Timer(0.3, stopping.set).start()
        with pytest.raises(GateClosed, match="stopped while h2 waited"):
            with gate.hold("h2", IMG_B, stopping=stopping):
                pass


def test_a_waiting_host_of_a_higher_priority_goes_first_across_conductors(db, gates):
    """One slot, held; a host of priority 10 starts waiting before a host of priority 90 of
    another conductor: when the slot frees, the 90 gets it, then the 10."""
    holder = gates(db, Limits(total=1))
    low, high = gates(db, Limits(total=1), holder="c2"), gates(db, Limits(total=1), holder="c3")
    order: list[str] = []
    told: list[str] = []

    def wait_for_slot(gate: DownloadGate, host: str, priority: int) -> None:
        with gate.hold(host, IMG_A, on_wait=told.append, priority=priority):
            order.append(host)
            time.sleep(0.3)

    with holder.hold("h1", IMG_B):
        threads = [threading.Thread(target=wait_for_slot, args=(low, "h-low", 10))]
        threads[0].start()
        time.sleep(0.5)
        threads.append(threading.Thread(target=wait_for_slot, args=(high, "h-high", 90)))
        threads[1].start()
        time.sleep(0.5)
        assert sorted(w["priority"] for w in download_leases.waiters_list(db)) == [10, 90]
    for thread in threads:
        thread.join(10)
    assert order == ["h-high", "h-low"]
    assert download_leases.waiters_list(db, live_only=False) == []
    assert all("max_concurrent_downloads = 1" in reason for reason in told)


def test_a_host_that_stops_waiting_leaves_no_waiter(db, gates):
    gate = gates(db, Limits(total=1))
    stopping = threading.Event()
    with gate.hold("h1", IMG_A):
        threading.Timer(0.5, stopping.set).start()
        with pytest.raises(GateClosed):
            with gate.hold("h2", IMG_B, stopping=stopping, priority=100):
                pass
        assert download_leases.waiters_list(db, live_only=False) == []
    with gate.hold("h3", IMG_B, priority=0):  # nothing holds the low priority back
        pass


def test_held_leases_are_renewed_and_never_lapse(db, gates):
    gate = gates(db, Limits(total=1), lease_seconds=3)  # renewed every second
    with gate.hold("h1", IMG_A):
        for _ in range(5):
            time.sleep(1)
            assert download_leases.lease_acquire(db, "x", "h2", IMG_B, Limits(total=1),
                                                 3).lease_id is None


def test_a_dead_holders_lease_lapses(db, gates):
    dead = gates(db, Limits(total=1), lease_seconds=3)
    stuck = threading.Event()

    def hold_forever() -> None:
        with dead.hold("h1", IMG_A):
            stuck.wait(10)

    holder = threading.Thread(target=hold_forever)
    holder.start()
    time.sleep(0.3)
    dead.stop()  # no more renewals: as a conductor killed with its leases
    began = time.monotonic()
    with gates(db, Limits(total=1)).hold("h2", IMG_B):
        waited = time.monotonic() - began
    stuck.set()
    holder.join(5)
    assert 1 < waited < 6, waited


def test_a_limited_job_calls_each_image_under_a_lease_and_shows_waiting_hosts(
        conf, db, gates):
    """Three hosts, one slot per image: the job calls one image at a time per host, at most
    one host per image at once, and a host waiting is stored ``waiting`` meanwhile."""
    agg_id = make_aggregate(db, ["h1", "h2", "h3"])
    gate = gates(db, Limits(per_image=1))
    seen_waiting: list[dict[str, Any]] = []

    def slow(image_ids: list[str]) -> dict[str, Any]:
        time.sleep(0.3)
        seen_waiting.extend(r for r in jobs.job_list(db)[0]["results"]
                            if r["state"] == jobs.WAITING)
        return {i: {"state": "cached", "reason": None, "bytes_downloaded": 10}
                for i in image_ids}

    computes = FakeComputes({h: slow for h in ("h1", "h2", "h3")})
    conf.set_override("precache_concurrency", 3, group="image_cache")
    pools = Pools()
    try:
        precacher = Precacher(
            conf, db, "conductor1", clients=computes, images=FakeImages(),  # type: ignore[arg-type]
            notifier=notifications.CacheNotifier(None), host_calls=pools.host_calls(3),
            job_runner=pools.coordinators().submit, gate=gate)
        job = precacher.start(_ctxt(), agg_id, [IMG_A, IMG_B])
        done = wait_done(db, job["uuid"], timeout=30)
    finally:
        pools.shutdown()
    assert done["state"] == jobs.DONE
    assert results_by_host(db, job["uuid"]) == {
        h: {IMG_A: ("cached", None), IMG_B: ("cached", None)} for h in ("h1", "h2", "h3")}
    assert sorted(computes.calls) == sorted(
        (h, [i]) for h in ("h1", "h2", "h3") for i in (IMG_A, IMG_B))
    assert computes.max_in_flight <= 2  # one host per image
    assert seen_waiting and all("max_concurrent_downloads_per_image" in (r["reason"] or "")
                                for r in seen_waiting)
    assert download_leases.leases_list(db) == []


def test_a_pin_is_stored_on_the_job_and_sent_to_the_computes(conf, db):
    agg_id = make_aggregate(db, ["h1"])
    sent: list[Any] = []

    class PinComputes(FakeComputes):
        def cache_images(self, ctxt: Any, host: str, image_ids: list[str],
                         **kwargs: Any) -> Any:
            sent.append(kwargs)
            return super().cache_images(ctxt, host, image_ids)

    pools = Pools()
    try:
        precacher = Precacher(
            conf, db, "conductor1", clients=PinComputes(), images=FakeImages(),  # type: ignore[arg-type]
            notifier=notifications.CacheNotifier(None), host_calls=pools.host_calls(1),
            job_runner=lambda f: f())
        before = time.time()
        job = precacher.start(_ctxt(), agg_id, [IMG_A], pin_seconds=600)
    finally:
        pools.shutdown()
    stored = jobs.job_get(db, job["uuid"])
    assert stored["pin_until"] is not None
    (kwargs,) = sent
    assert before + 599 < kwargs["pin_until"] < time.time() + 601
