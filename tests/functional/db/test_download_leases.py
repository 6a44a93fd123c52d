"""Download leases (fleetcache.common.db.download_leases) on SQLite, PostgreSQL and MariaDB:
the limits hold, also when several "conductors" (engines of their own) race for the slots."""

from __future__ import annotations

import concurrent.futures
import threading
import time

import pytest
import sqlalchemy.exc
from sqlalchemy import update

from fleetcache.common.db import download_leases, models
from fleetcache.common.db.download_leases import Limits
from fleetcache.common.db.session import Database
from tests.waiting import wait_for

pytestmark = pytest.mark.db


def _take(db: Database, image: str, limits: Limits, host: str = "c1",
          ttl: float = 60) -> int | None:
    return download_leases.lease_acquire(db, "cond1", host, image, limits, ttl).lease_id


def test_per_image_limit_counts_that_image_only(db: Database) -> None:
    limits = Limits(per_image=2)
    assert _take(db, "A", limits) is not None
    assert _take(db, "A", limits, host="c2") is not None
    refused = download_leases.lease_acquire(db, "cond1", "c3", "A", limits, 60)
    assert refused.lease_id is None and "max_concurrent_downloads_per_image = 2" in (
        refused.reason or "")
    assert _take(db, "B", limits) is not None


def test_total_limit_counts_every_image(db: Database) -> None:
    limits = Limits(total=2)
    assert _take(db, "A", limits) is not None
    assert _take(db, "B", limits) is not None
    refused = download_leases.lease_acquire(db, "cond1", "c3", "C", limits, 60)
    assert refused.lease_id is None and "max_concurrent_downloads = 2" in (refused.reason or "")


def test_release_frees_the_slot(db: Database) -> None:
    limits = Limits(per_image=1)
    lease = _take(db, "A", limits)
    assert lease is not None and _take(db, "A", limits) is None
    download_leases.lease_release(db, lease)
    assert _take(db, "A", limits) is not None
    download_leases.lease_release(db, lease)  # twice: nothing to do


def test_a_lapsed_lease_frees_its_slot_and_renewal_keeps_one(db: Database) -> None:
    limits = Limits(per_image=1)
    dead = _take(db, "A", limits, ttl=0.3)
    live = _take(db, "B", limits, ttl=0.3)
    assert dead is not None and live is not None
    assert download_leases.leases_renew(db, "cond1", [live], 60) == 1
    assert download_leases.leases_renew(db, "other", [dead], 60) == 0  # not its holder
    time.sleep(0.5)
    assert _take(db, "A", limits) is not None  # the dead holder's lease lapsed
    assert _take(db, "B", limits) is None  # the renewed one still holds
    assert [lease["image_id"] for lease in download_leases.leases_list(db)] == ["B", "A"]


def test_a_missing_gate_row_is_created(db: Database) -> None:
    with db.transaction() as session:
        session.query(models.DownloadGate).delete()
    assert _take(db, "A", Limits(total=1)) is not None
    assert _take(db, "B", Limits(total=1)) is None


def test_racing_conductors_never_exceed_the_limits(db: Database) -> None:
    """Four engines (as four conductor processes would have), eight threads each, take and
    give back leases as fast as they can; a watcher counts the live leases all along."""
    limits = Limits(per_image=2, total=3)
    engines = [Database(db.url) for _ in range(4)]
    stop = threading.Event()
    seen: list[tuple[int, int]] = []

    def worker(n: int) -> int:
        mine = engines[n % len(engines)]
        taken = 0
        while not stop.is_set():
            image = "AB"[n % 2]
            try:
                grant = download_leases.lease_acquire(mine, f"cond{n}", f"c{n}", image,
                                                      limits, 60)
            except sqlalchemy.exc.OperationalError:  # a lock wait gave up: try again
                continue
            if grant.lease_id is not None:
                taken += 1
                time.sleep(0.005)
                download_leases.lease_release(mine, grant.lease_id)
        return taken

    def watch() -> None:
        while not stop.is_set():
            leases = download_leases.leases_list(db)
            per_image = max([sum(1 for x in leases if x["image_id"] == i) for i in "AB"])
            seen.append((len(leases), per_image))

    try:
        with concurrent.futures.ThreadPoolExecutor(33) as pool:
            watcher = pool.submit(watch)
            workers = [pool.submit(worker, n) for n in range(32)]
            time.sleep(3)
            stop.set()
            taken = sum(w.result() for w in workers)
            watcher.result()
    finally:
        for engine in engines:
            engine.dispose()
    assert taken >= 4, taken  # under load PostgreSQL managed 17 in the 3 s
    assert seen and max(total for total, _ in seen) <= 3, max(seen)
    assert max(per_image for _, per_image in seen) <= 2, max(seen)
    assert max(total for total, _ in seen) >= 2  # the slots were used side by side


def test_lease_times_keep_microseconds(db: Database) -> None:
    lease = _take(db, "A", Limits(total=5), ttl=0.25)
    assert lease is not None
    with db.transaction() as session:
        session.execute(update(models.DownloadLease).values(
            expires_at=models.utcnow().replace(microsecond=999999)))
    (row,) = download_leases.leases_list(db, live_only=False)
    assert row["expires_at"].microsecond == 999999


def test_a_restarting_conductor_releases_its_predecessors_leases(db: Database) -> None:
    limits = Limits(total=5)
    for holder in ("cond1/100", "cond1/101", "cond10/7", "cond_/1"):
        assert download_leases.lease_acquire(db, holder, "c1", "A", limits, 60).lease_id
    assert download_leases.leases_release_holders(db, "cond1/") == 2
    assert sorted(x["holder"] for x in download_leases.leases_list(db)) == ["cond10/7",
                                                                          "cond_/1"]
    assert download_leases.leases_release_holders(db, "cond%/") == 0  # no wildcard


def _try(db: Database, host: str, image: str, limits: Limits, priority: int,
         waiter: int | None = None, **kwargs: float) -> download_leases.Grant:
    return download_leases.lease_acquire(db, "cond1", host, image, limits, 60,
                                         priority=priority, waiter_id=waiter, **kwargs)


def test_a_slot_goes_to_the_higher_priority_waiting_and_then_to_the_lower(db: Database) -> None:
    limits = Limits(per_image=1)
    first = _take(db, "A", limits)
    high = _try(db, "c-high", "A", limits, 80)
    assert high.lease_id is None and high.waiter_id is not None
    assert "max_concurrent_downloads_per_image = 1" in (high.reason or "")
    assert first is not None
    download_leases.lease_release(db, first)

    low = _try(db, "c-low", "A", limits, 20)
    assert low.lease_id is None and low.reason == "a job of priority 80 waits for this slot"
    assert [(w["host"], w["priority"]) for w in download_leases.waiters_list(db)] == [
        ("c-high", 80), ("c-low", 20)]
    assert _try(db, "c-low", "B", limits, 20).lease_id is not None  # not the same slot

    granted = _try(db, "c-high", "A", limits, 80, high.waiter_id)  # not held back by itself
    assert granted.lease_id is not None
    assert [w["host"] for w in download_leases.waiters_list(db)] == ["c-low"]
    download_leases.lease_release(db, granted.lease_id)
    assert _try(db, "c-low", "A", limits, 20, low.waiter_id).lease_id is not None
    assert download_leases.waiters_list(db) == []


def test_under_the_overall_limit_a_waiter_holds_back_only_slots_it_could_take(
        db: Database) -> None:
    limits = Limits(per_image=1, total=2)
    on_b = _take(db, "B", limits, host="c0")
    high = _try(db, "c-high", "B", limits, 90)
    assert high.lease_id is None and "per_image" in (high.reason or "")
    # B's own slot is taken: the overall slot left is no use to the waiter, another image
    # of a lower priority takes it.
    on_a = _try(db, "c1", "A", limits, 10).lease_id
    assert on_a is not None and on_b is not None
    download_leases.lease_release(db, on_b)
    # Now the overall slot left is the waiter's, whatever the image.
    refused = _try(db, "c2", "C", limits, 50)
    assert refused.lease_id is None and "priority 90" in (refused.reason or "")
    assert _try(db, "c-high", "B", limits, 90, high.waiter_id).lease_id is not None


def test_equal_priorities_take_free_slots_as_before(db: Database) -> None:
    limits = Limits(total=1)
    lease = _take(db, "A", limits)
    waiting = _try(db, "c2", "B", limits, 50)
    assert waiting.lease_id is None and waiting.waiter_id is not None
    assert lease is not None
    download_leases.lease_release(db, lease)
    # Whoever attempts first gets the slot, waiter or not; lower priorities still wait.
    assert _try(db, "c0", "C", limits, 40).lease_id is None
    assert _try(db, "c3", "C", limits, 50).lease_id is not None


def test_a_lapsed_waiter_holds_nothing_back_and_a_released_one_neither(db: Database) -> None:
    limits = Limits(total=1)
    lease = _take(db, "A", limits)
    assert lease is not None
    lapsing = _try(db, "c-high", "B", limits, 100, waiter_ttl=0.3)
    released = download_leases.lease_acquire(db, "cond2/7", "c-other", "B", limits, 60,
                                             priority=90)
    assert lapsing.waiter_id is not None and released.waiter_id is not None
    assert download_leases.leases_release_holders(db, "cond2/") == 0  # its waiter, no lease
    download_leases.lease_release(db, lease)
    time.sleep(0.5)
    assert download_leases.waiters_list(db) == []
    assert _try(db, "c-low", "C", limits, 0).lease_id is not None
    # A waiter deleted (its host stopped waiting) is refreshed as a new one if it comes back.
    again = _try(db, "c-high", "B", limits, 100, lapsing.waiter_id)
    assert again.lease_id is None and again.waiter_id not in (None, lapsing.waiter_id)
    download_leases.waiter_release(db, again.waiter_id or 0)
    download_leases.waiter_release(db, again.waiter_id or 0)  # twice: nothing to do
    assert download_leases.waiters_list(db, live_only=False) == []


def test_racing_low_priority_conductors_never_take_a_slot_a_higher_one_waits_for(
        db: Database) -> None:
    """The slot is held, then given back with a high-priority host waiting on its own engine
    (polling every 0.2 s) while six low-priority ones on three other engines poll without
    pause: the high one gets it every round."""
    limits = Limits(total=1)
    engines = [Database(db.url) for _ in range(4)]
    stop = threading.Event()
    winners: list[str] = []

    def low(n: int) -> None:
        mine, waiter = engines[1 + n % 3], None
        while not stop.is_set():
            try:
                grant = download_leases.lease_acquire(mine, f"low{n}", f"c{n}", "AB"[n % 2],
                                                      limits, 60, priority=10,
                                                      waiter_id=waiter)
            except sqlalchemy.exc.OperationalError:
                continue
            if grant.lease_id is not None:
                winners.append("low")
                download_leases.lease_release(mine, grant.lease_id)
                return
            waiter = grant.waiter_id or waiter

    def high() -> int:
        waiter = None
        while True:
            try:
                grant = download_leases.lease_acquire(engines[0], "high", "c-high", "A",
                                                      limits, 60, priority=90,
                                                      waiter_id=waiter)
            except sqlalchemy.exc.OperationalError:
                continue
            if grant.lease_id is not None:
                winners.append("high")
                return grant.lease_id
            waiter = grant.waiter_id or waiter
            time.sleep(0.2)

    try:
        for _ in range(2):
            held = _take(db, "A", limits, host="c-first")
            assert held is not None
            winners.clear()
            stop.clear()
            with concurrent.futures.ThreadPoolExecutor(7) as pool:
                high_call = pool.submit(high)
                lows = [pool.submit(low, n) for n in range(6)]
                # Every waiter registered (a fixed pause lost this race on a loaded machine).
                wait_for(lambda: {w["holder"] for w in download_leases.waiters_list(db)}
                         >= {"high", *(f"low{n}" for n in range(6))},
                         "the high and the six low waiters to register", timeout=20)
                download_leases.lease_release(db, held)
                got = high_call.result(timeout=30)
                download_leases.lease_release(db, got)
                time.sleep(0.3)
                stop.set()
                for call in lows:
                    call.result(timeout=30)
            assert winners[0] == "high", winners
    finally:
        for engine in engines:
            engine.dispose()
