"""A job's terms in the conductor: its window (scheduled, cut at the close, resumed in the next
one), its deadline, and its per-request limits (fleetcache.conductor.precache.job,
.precacher, .hostcall, .windows), on fake computes that take compute RPC 1.5."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import update

from fleetcache.common import exception
from fleetcache.common.db import jobs, models
from fleetcache.conductor.precache import notifications
from fleetcache.conductor.precache.ownership import JobOwner
from fleetcache.conductor.precache.precacher import Precacher
from fleetcache.conductor.precache.windows import JobWindows
from tests.unit.conductor.precache.test_job import (
    IMG_A,
    FakeComputes,
    FakeImages,
    FakeNotifier,
    Pools,
    _ctxt,
    make_aggregate,
    results_by_host,
)


@pytest.fixture
def pools() -> Iterator[Pools]:
    made = Pools()
    yield made
    made.shutdown()


OWNER = JobOwner(host="conductor1", owner="conductor1:one", lease_time=30, catch_up_window=0)
UTC = datetime.UTC


class TermsComputes(FakeComputes):
    """Computes of compute RPC 1.5: each call's keyword arguments are kept, and ``slow`` hosts
    download until the call's end time, then answer ``paused`` with 5 bytes kept."""

    takes_terms = True

    def __init__(self, slow: tuple[str, ...] = (), delay: float = 0.0) -> None:
        super().__init__(delay=delay)
        self.slow = slow
        self.kwargs: list[tuple[str, dict[str, Any]]] = []
        self.resumed: set[str] = set()

    def cache_images(self, ctxt: Any, host: str, image_ids: list[str],  # type: ignore[override]
                     **kwargs: Any) -> Any:
        with self._lock:
            self.kwargs.append((host, kwargs))
        if host in self.slow and host not in self.resumed:
            until = kwargs["until"]
            time.sleep(max(0.0, until - time.time()))
            self.resumed.add(host)
            return {i: {"state": "paused", "reason": "5 of 10 bytes kept",
                        "bytes_downloaded": 5} for i in image_ids}
        if host in self.resumed:
            return {i: {"state": "cached", "reason": None, "bytes_downloaded": 5,
                        "bytes_resumed": 5} for i in image_ids}
        return super().cache_images(ctxt, host, image_ids)


def _precacher(conf, db, computes, pools, notifier=None, size: int = 4) -> Precacher:
    return Precacher(
        conf, db, OWNER.host, clients=computes, images=FakeImages(),
        notifier=notifications.CacheNotifier(notifier), host_calls=pools.host_calls(size),
        job_runner=lambda f: f(), owner=OWNER)


def _clock(seconds_from_now: float) -> str:
    return (datetime.datetime.now(UTC) + datetime.timedelta(seconds=seconds_from_now)
            ).strftime("%H:%M:%S")


def _instant(seconds_from_now: float) -> str:
    return (datetime.datetime.now(UTC) + datetime.timedelta(seconds=seconds_from_now)
            ).isoformat()


def _set_terms(db, job_uuid: str, terms: dict[str, Any]) -> None:
    with db.transaction() as session:
        session.execute(update(models.CacheJob).where(models.CacheJob.uuid == job_uuid)
                        .values(terms=terms))


def test_a_job_before_its_not_before_is_scheduled_and_starts_then(conf, db, pools):
    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1", "h2"])
    computes, notifier = TermsComputes(), FakeNotifier()
    precacher = _precacher(conf, db, computes, pools, notifier)
    windows = JobWindows(precacher, OWNER)

    job = precacher.start(_ctxt(), agg_id, [IMG_A], terms={"not_before": _instant(1.5)})

    assert job["state"] == jobs.SCHEDULED and job["next_start_at"] is not None
    assert jobs.job_get(db, job["uuid"])["state"] == jobs.SCHEDULED
    assert windows.start_due() == [] and computes.calls == []
    time.sleep(1.6)
    assert windows.start_due() == [job["uuid"]]
    done = jobs.job_get(db, job["uuid"])
    assert done["state"] == jobs.DONE and done["next_start_at"] is None
    assert sorted(h for h, _ in computes.calls) == ["h1", "h2"]
    assert [e for e, _ in notifier.sent].count(notifications.START) == 1


def test_a_window_that_closes_cuts_calls_and_the_next_one_finishes_them(conf, db, pools):
    """h1 finishes, h2 is cut at the close (``until``) and kept ``waiting``, h3 is not asked
    (parallelism 1); in the next window h2 resumes and h3 is asked; h1 is not asked again."""
    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1", "h2", "h3"])
    computes = TermsComputes(slow=("h2",))
    precacher = _precacher(conf, db, computes, pools)
    window = {"start": _clock(-60), "end": _clock(1.5), "timezone": "UTC"}

    job = precacher.start(_ctxt(), agg_id, [IMG_A],
                          terms={"window": window, "parallelism": 1})

    stored = jobs.job_get(db, job["uuid"])
    assert stored["state"] == jobs.SCHEDULED
    assert stored["next_start_at"] > models.utcnow() + datetime.timedelta(hours=23)
    by_host = results_by_host(db, job["uuid"])
    assert by_host["h1"] == {IMG_A: ("cached", None)}
    assert by_host["h2"][IMG_A][0] == jobs.WAITING
    assert "paused at the end of the job's window" in by_host["h2"][IMG_A][1]
    assert "h3" not in by_host
    until = dict(computes.kwargs)["h2"]["until"]
    assert abs(until - (time.time() - 0.0)) < 5  # the window's close, a moment ago

    # The next window: open now (the test does not wait a day).
    _set_terms(db, job["uuid"], {"parallelism": 1})
    jobs.job_schedule(db, job["uuid"], models.utcnow())
    assert JobWindows(precacher, OWNER).start_due() == [job["uuid"]]

    done = jobs.job_get(db, job["uuid"])
    assert done["state"] == jobs.DONE
    assert [h for h, _ in computes.calls if h == "h1"] == ["h1"]
    assert {(r["host"], r["state"], r["bytes_downloaded"]) for r in done["results"]} == {
        ("h1", "cached", 10), ("h2", "cached", 10), ("h3", "cached", 10)}


def test_the_deadline_ends_the_job_with_the_rest_skipped(conf, db, pools):
    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1", "h2", "h3"])
    computes, notifier = TermsComputes(slow=("h2",)), FakeNotifier()
    precacher = _precacher(conf, db, computes, pools, notifier)

    job = precacher.start(_ctxt(), agg_id, [IMG_A],
                          terms={"deadline": _instant(1.5), "parallelism": 1})

    done = jobs.job_get(db, job["uuid"])
    assert done["state"] == jobs.DONE
    states = {r["host"]: (r["state"], r["reason"]) for r in done["results"]}
    assert states["h1"] == ("cached", None)
    assert states["h2"][0] == "skipped" and "deadline" in states["h2"][1]
    assert states["h3"][0] == "skipped" and "deadline" in states["h3"][1]
    assert [h for h, _ in computes.calls] == ["h1"]  # h3 was never asked
    assert [e for e, _ in notifier.sent][-1] == notifications.END


def test_a_scheduled_job_whose_deadline_passes_ends_without_asking_anyone(conf, db, pools):
    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1"])
    computes = TermsComputes()
    precacher = _precacher(conf, db, computes, pools)
    job = precacher.start(_ctxt(), agg_id, [IMG_A],
                          terms={"not_before": _instant(0.5), "deadline": _instant(1.0)})
    time.sleep(1.1)

    assert JobWindows(precacher, OWNER).start_due() == [job["uuid"]]

    done = jobs.job_get(db, job["uuid"])
    assert done["state"] == jobs.DONE and computes.calls == []
    assert results_by_host(db, job["uuid"])["h1"][IMG_A][0] == "skipped"


def test_parallelism_bounds_the_jobs_calls_in_flight(conf, db, pools):
    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, [f"h{n}" for n in range(6)])
    computes = TermsComputes(delay=0.1)
    _precacher(conf, db, computes, pools).start(_ctxt(), agg_id, [IMG_A],
                                                terms={"parallelism": 2})

    assert len(computes.calls) == 6 and computes.max_in_flight == 2


def test_origin_downloads_bound_the_jobs_downloads(conf, db, pools):
    """A job with ``origin_downloads`` 1 calls one host at a time (a second call would only
    hold a worker of the shared pool while it waits for the job's slot)."""
    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1", "h2", "h3"])
    computes = TermsComputes(delay=0.3)
    _precacher(conf, db, computes, pools).start(_ctxt(), agg_id, [IMG_A],
                                                terms={"origin_downloads": 1})

    assert len(computes.calls) == 3 and computes.max_in_flight == 1


def test_the_job_rate_is_shared_by_the_calls_that_can_run_at_once(conf, db, pools):
    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1", "h2", "h3"])
    computes = TermsComputes()
    _precacher(conf, db, computes, pools).start(
        _ctxt(), agg_id, [IMG_A], terms={"job_bytes_per_second": 3 * 2**20})

    assert {kw["bytes_per_second"] for _, kw in computes.kwargs} == {2**20}
    assert all("until" not in kw for _, kw in computes.kwargs)  # no window, no deadline


def test_the_stricter_of_the_host_rate_and_the_job_share_wins(conf, db, pools):
    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1", "h2"])
    computes = TermsComputes()
    _precacher(conf, db, computes, pools).start(
        _ctxt(), agg_id, [IMG_A],
        terms={"job_bytes_per_second": 8 * 2**20, "host_bytes_per_second": 2**20})

    assert {kw["bytes_per_second"] for _, kw in computes.kwargs} == {2**20}


def test_a_compute_before_rpc_1_5_is_called_without_the_terms(conf, db, pools):
    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1"])
    computes = TermsComputes()
    computes.takes_terms = False  # type: ignore[misc]
    job = _precacher(conf, db, computes, pools).start(
        _ctxt(), agg_id, [IMG_A],
        terms={"deadline": _instant(3600), "host_bytes_per_second": 2**20})

    assert computes.kwargs == [("h1", {})]
    assert jobs.job_get(db, job["uuid"])["state"] == jobs.DONE


def test_terms_above_the_operators_caps_are_refused_before_a_job_exists(conf, db, pools):
    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1"])
    with pytest.raises(exception.InvalidInput, match="fleetcache:parallelism: 5 is above"):
        _precacher(conf, db, TermsComputes(), pools).start(
            _ctxt(), agg_id, [IMG_A], terms={"parallelism": 5})
    assert jobs.job_list(db) == []


def test_a_scheduled_job_is_taken_over_and_still_waits(conf, db, pools):
    from fleetcache.conductor.precache.takeover import JobTakeover

    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1"])
    computes = TermsComputes()
    job = _precacher(conf, db, computes, pools).start(
        _ctxt(), agg_id, [IMG_A], terms={"not_before": _instant(3600)})
    other = JobOwner(host="conductor2", owner="conductor2:two", lease_time=30,
                     catch_up_window=0)
    with db.transaction() as session:  # the first conductor died: its lease lapsed
        session.execute(update(models.CacheJob).values(
            lease_expires_at=datetime.datetime(2000, 1, 1)))
    second = Precacher(
        conf, db, other.host, clients=computes, images=FakeImages(),
        notifier=notifications.CacheNotifier(None), host_calls=pools.host_calls(2),
        job_runner=lambda f: f(), owner=other)

    assert JobTakeover(second, other).claim() == [job["uuid"]]

    taken = jobs.job_get(db, job["uuid"])
    assert (taken["state"], taken["owner"]) == (jobs.SCHEDULED, other.owner)
    assert computes.calls == []
    jobs.job_schedule(db, job["uuid"], models.utcnow())
    _set_terms(db, job["uuid"], {})
    assert JobWindows(second, OWNER).start_due() == []  # not the first conductor's any more
    assert JobWindows(second, other).start_due() == [job["uuid"]]
    assert jobs.job_get(db, job["uuid"])["state"] == jobs.DONE


def _catching_up(conf, db, computes, pools, terms):
    """A job whose host ``down`` is pending (catch-up on), with ``terms``."""
    from fleetcache.common.db import services as db_services

    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["up", "down"])
    service = db_services.service_get(db, "down", "fleetcache-compute")
    db_services.service_update(db, service["id"], forced_down=True)
    owner = JobOwner(host="conductor1", owner="conductor1:one", lease_time=30,
                     catch_up_window=600)
    precacher = Precacher(
        conf, db, owner.host, clients=computes, images=FakeImages(),
        notifier=notifications.CacheNotifier(None), host_calls=pools.host_calls(2),
        job_runner=lambda f: f(), owner=owner)
    job = precacher.start(_ctxt(), agg_id, [IMG_A], terms=terms)
    assert jobs.job_get(db, job["uuid"])["state"] == jobs.CATCHING_UP
    db_services.service_update(db, service["id"], forced_down=False)
    return precacher, owner, job


def test_catch_up_waits_for_the_window_and_paces_the_host(conf, db, pools):
    from fleetcache.conductor.precache.catchup import CatchUp

    computes = TermsComputes()
    window = {"start": _clock(-60), "end": _clock(3600), "timezone": "UTC"}
    precacher, owner, job = _catching_up(conf, db, computes, pools, {
        "window": window, "host_bytes_per_second": 2**20})
    _set_terms(db, job["uuid"], {"window": {**window, "start": _clock(1800)},
                                 "host_bytes_per_second": 2**20})
    CatchUp(precacher, owner).sweep()  # the window closed meanwhile: nobody asked
    time.sleep(0.2)
    assert [h for h, _ in computes.calls] == ["up"]
    assert results_by_host(db, job["uuid"])["down"][IMG_A][0] == jobs.PENDING

    _set_terms(db, job["uuid"], {"window": window, "host_bytes_per_second": 2**20})
    CatchUp(precacher, owner).sweep()
    deadline = time.monotonic() + 10
    while jobs.job_get(db, job["uuid"])["state"] != jobs.DONE:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    host, kwargs = computes.kwargs[-1]
    assert host == "down" and kwargs["bytes_per_second"] == 2**20 and "until" in kwargs


def test_catch_up_after_the_deadline_skips_the_pending_host(conf, db, pools):
    from fleetcache.conductor.precache.catchup import CatchUp

    computes = TermsComputes()
    precacher, owner, job = _catching_up(conf, db, computes, pools,
                                         {"deadline": _instant(0.5)})
    time.sleep(0.6)
    CatchUp(precacher, owner).sweep()
    deadline = time.monotonic() + 10
    while jobs.job_get(db, job["uuid"])["state"] != jobs.DONE:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    state, reason = results_by_host(db, job["uuid"])["down"][IMG_A]
    assert state == "skipped" and "deadline" in reason
    assert [h for h, _ in computes.calls] == ["up"]


def test_a_higher_priority_jobs_hosts_are_called_first(conf, db, pools):
    from tests.unit.conductor.precache.test_job import IMG_B

    conf.set_override("precache_concurrency", 1, group="image_cache")
    agg_id = make_aggregate(db, ["h1", "h2"])
    computes = TermsComputes()
    host_calls = pools.host_calls(1)
    coordinators = pools.coordinators()
    precacher = Precacher(
        conf, db, OWNER.host, clients=computes, images=FakeImages(),
        notifier=notifications.CacheNotifier(None), host_calls=host_calls,
        job_runner=coordinators.submit, owner=OWNER)
    release = threading.Event()
    host_calls.run(release.wait)  # the pool's one worker is busy: the jobs' calls queue up

    low = precacher.start(_ctxt(), agg_id, [IMG_A], terms={"priority": 10})
    high = precacher.start(_ctxt(), agg_id, [IMG_B], terms={"priority": 90})
    deadline = time.monotonic() + 5
    while host_calls.queued < 4:  # both jobs' two hosts queued
        assert time.monotonic() < deadline
        time.sleep(0.01)
    release.set()
    for job in (low, high):
        deadline = time.monotonic() + 10
        while jobs.job_get(db, job["uuid"])["state"] != jobs.DONE:
            assert time.monotonic() < deadline
            time.sleep(0.02)

    assert [ids for _, ids in computes.calls] == [[IMG_B], [IMG_B], [IMG_A], [IMG_A]]


def test_a_due_job_is_launched_once_while_its_coordinator_waits(conf, db, pools):
    """The job stays ``scheduled`` until its run starts: the next look of the windows must
    not launch it again while the run waits for a coordinator thread."""
    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1"])
    launched: list[Any] = []  # a busy coordinator pool: the run waits for a worker
    precacher = Precacher(
        conf, db, OWNER.host, clients=TermsComputes(), images=FakeImages(),
        notifier=notifications.CacheNotifier(FakeNotifier()), host_calls=pools.host_calls(4),
        job_runner=launched.append, owner=OWNER)
    windows = JobWindows(precacher, OWNER)
    job = precacher.start(_ctxt(), agg_id, [IMG_A], terms={"not_before": _instant(0.2)})
    time.sleep(0.3)

    assert windows.start_due() == [job["uuid"]]
    assert windows.start_due() == []  # the next look, the run still queued
    assert len(launched) == 1 and jobs.job_get(db, job["uuid"])["state"] == jobs.QUEUED


def test_a_run_that_lost_its_job_does_not_reschedule_it(conf, db, pools):
    """The job is taken over (another owner, running) while this run's call is cut at the
    window's end: the stale run leaves the new owner's job alone."""

    class Stolen(TermsComputes):
        def cache_images(self, ctxt: Any, host: str, image_ids: list[str],
                         **kwargs: Any) -> Any:
            with db.transaction() as session:
                session.execute(update(models.CacheJob).values(
                    owner="conductor2:two", state=jobs.RUNNING))
            return super().cache_images(ctxt, host, image_ids, **kwargs)

    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1"])
    precacher = _precacher(conf, db, Stolen(slow=("h1",)), pools)
    window = {"start": _clock(-60), "end": _clock(1.0), "timezone": "UTC"}
    job = precacher.start(_ctxt(), agg_id, [IMG_A], terms={"window": window})

    stored = jobs.job_get(db, job["uuid"])
    assert (stored["owner"], stored["state"]) == ("conductor2:two", jobs.RUNNING)


def test_a_catching_up_job_ends_at_its_deadline_while_its_host_stays_down(conf, db, pools):
    from fleetcache.common.db import services as db_services
    from fleetcache.conductor.precache.catchup import CatchUp

    precacher, owner, job = _catching_up(conf, db, TermsComputes(), pools,
                                         {"deadline": _instant(0.5)})
    service = db_services.service_get(db, "down", "fleetcache-compute")
    db_services.service_update(db, service["id"], forced_down=True)  # it stays down
    time.sleep(0.6)
    CatchUp(precacher, owner).sweep()

    assert jobs.job_get(db, job["uuid"])["state"] == jobs.DONE
    state, reason = results_by_host(db, job["uuid"])["down"][IMG_A]
    assert state == "skipped" and "deadline" in reason


def test_a_window_that_closes_ends_the_wait_for_a_download_slot(conf, db, pools):
    """h1 holds the image service's one slot until the window's end; h2, waiting for a
    slot, stops waiting then: it is left for the next window, without a call."""
    from fleetcache.common.db.download_leases import Limits
    from fleetcache.conductor.precache.origin import DownloadGate

    conf.set_override("precache_concurrency", 4, group="image_cache")
    agg_id = make_aggregate(db, ["h1", "h2"])
    computes = TermsComputes(slow=("h1",))
    gate = DownloadGate(db, "conductor1/1", Limits(total=1), lease_seconds=30)
    try:
        precacher = Precacher(
            conf, db, OWNER.host, clients=computes, images=FakeImages(),
            notifier=notifications.CacheNotifier(None), host_calls=pools.host_calls(4),
            job_runner=lambda f: f(), owner=OWNER, gate=gate)
        window = {"start": _clock(-60), "end": _clock(1.5), "timezone": "UTC"}
        started = time.monotonic()
        job = precacher.start(_ctxt(), agg_id, [IMG_A], terms={"window": window})
        elapsed = time.monotonic() - started
    finally:
        gate.stop()

    assert [h for h, _ in computes.kwargs] == ["h1"]  # h2 was never called
    assert jobs.job_get(db, job["uuid"])["state"] == jobs.SCHEDULED
    by_host = results_by_host(db, job["uuid"])
    assert by_host["h1"][IMG_A][0] == by_host["h2"][IMG_A][0] == jobs.WAITING
    assert "paused at the end of the job's window" in by_host["h2"][IMG_A][1]
    assert elapsed < 6  # not until a slot would have come free
