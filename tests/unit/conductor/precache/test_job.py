"""Unit tests of the pre-cache job (fleetcache.conductor.precache.job), fake compute client."""

from __future__ import annotations

import gc
import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import futurist
import oslo_messaging as messaging
import pytest
from oslo_config import cfg
from sqlalchemy import delete
from sqlalchemy.exc import OperationalError

from fleetcache.common import exception, rpc
from fleetcache.common.context import RequestContext, get_admin_context
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import jobs, models
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from fleetcache.conductor.manager import ConductorManager, ConductorState
from fleetcache.conductor.precache import job as precache
from fleetcache.conductor.precache import notifications, precacher
from fleetcache.conductor.precache import results as jobresults
from fleetcache.conductor.precache.hostpool import HostCallPool
from fleetcache.conductor.precache.precacher import Precacher
from fleetcache.image.source import ImageMeta

IMG_A = "a26887c6-c47b-4654-abb5-dfadf7d3f803"
IMG_B = "4d8c3732-a248-40ed-bebc-539a6ffd25c0"
IMG_MISSING = "00000000-0000-4000-8000-000000000000"


class FakeImages:
    def __init__(self, known: tuple[str, ...] = (IMG_A, IMG_B)) -> None:
        self.known = known
        self.shown: list[str] = []

    def show(self, ctxt: Any, image_id: str) -> ImageMeta:
        """Any spelling of a known id is found, and answered with the known one (as Glance
        on MySQL answers an upper-case id)."""
        self.shown.append(image_id)
        if image_id.lower() not in self.known:
            raise exception.ImageNotFound(image_id=image_id)
        return ImageMeta(id=image_id.lower())


class FakeComputes:
    """Answers ``cache_images`` per host; records calls and the most calls in flight."""

    def __init__(self, behaviour: dict[str, Callable[[list[str]], Any]] | None = None,
                 delay: float = 0.0) -> None:
        self.behaviour = behaviour or {}
        self.delay = delay
        self.calls: list[tuple[str, list[str]]] = []
        self.cells: list[Any] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def compute_api(self, cell: Any) -> FakeComputes:
        self.cells.append(cell["name"] if cell else None)
        return self

    def cache_images(self, ctxt: Any, host: str, image_ids: list[str]) -> Any:
        with self._lock:
            self.calls.append((host, list(image_ids)))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay)
            if host in self.behaviour:
                return self.behaviour[host](image_ids)
            return {i: {"state": "cached", "reason": None, "bytes_downloaded": 10}
                    for i in image_ids}
        finally:
            with self._lock:
                self.in_flight -= 1


class FakeNotifier:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def info(self, ctxt: Any, event_type: str, payload: dict[str, Any]) -> None:
        with self._lock:
            self.sent.append((event_type, payload))

    def events(self, event_type: str) -> list[dict[str, Any]]:
        return [p for e, p in self.sent if e == event_type]


class Pools:
    """The pools one test builds, as the conductor builds its own; all shut down after it."""

    def __init__(self) -> None:
        self._made: list[Any] = []

    def host_calls(self, size: int = 1) -> HostCallPool:
        pool = HostCallPool(size, name="test-precache")
        self._made.append(pool)
        return pool

    def coordinators(self, size: int = 4) -> futurist.ThreadPoolExecutor:
        pool = futurist.ThreadPoolExecutor(max_workers=size)
        self._made.append(pool)
        return pool

    def shutdown(self) -> None:
        for pool in self._made:
            if isinstance(pool, HostCallPool):
                pool.shutdown(wait=False, cancel_futures=True)
            else:
                pool.shutdown(wait=True)


@pytest.fixture
def pools() -> Iterator[Pools]:
    made = Pools()
    yield made
    made.shutdown()


def _ctxt() -> RequestContext:
    return get_admin_context()


def make_aggregate(db: Database, hosts: list[str], cells: int = 2) -> int:
    cell_rows = [db_cells.cell_create(db, f"cell{n}", f"fake://cell{n}")
                 for n in range(1, cells + 1)]
    agg = db_aggregates.aggregate_create(db, "agg1")
    for n, host in enumerate(hosts):
        db_services.service_register(db, host, "fleetcache-compute", "compute",
                                     cell_rows[n % cells]["id"])
        db_aggregates.aggregate_add_host(db, agg["id"], host)
    return agg["id"]


def service_id(db: Database, host: str) -> int:
    return db_services.service_get(db, host, "fleetcache-compute")["id"]


def make_precacher(conf: cfg.ConfigOpts, db: Database, computes: FakeComputes, pools: Pools,
                   notifier: FakeNotifier | None = None, sync: bool = True,
                   host_calls: HostCallPool | None = None,
                   job_runner: Callable[[Callable[[], None]], object] | None = None,
                   ) -> Precacher:
    """A precacher on fake computes; ``sync`` runs each job inside ``start`` (no coordinator
    pool), else on a coordinator pool of the test's own."""
    if job_runner is None:
        job_runner = (lambda f: f()) if sync else pools.coordinators().submit
    return Precacher(
        conf, db, "conductor1", clients=computes, images=FakeImages(),  # type: ignore[arg-type]
        notifier=notifications.CacheNotifier(notifier),
        host_calls=host_calls or pools.host_calls(conf.image_cache.precache_concurrency),
        job_runner=job_runner,
    )


def results_by_host(db: Database, job_uuid: str) -> dict[str, dict[str, tuple[str, str | None]]]:
    out: dict[str, dict[str, tuple[str, str | None]]] = {}
    for r in jobs.job_get(db, job_uuid)["results"]:
        out.setdefault(r["host"], {})[r["image_id"]] = (r["state"], r["reason"])
    return out


def wait_done(db: Database, job_uuid: str, timeout: float = 10) -> jobs.JobDict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = jobs.job_get(db, job_uuid)
        if job["state"] in (jobs.DONE, jobs.FAILED):
            return job
        time.sleep(0.02)
    raise AssertionError(f"job {job_uuid} did not finish")


def test_all_hosts_cached_results_persisted_and_notified(conf, db, pools):
    agg_id = make_aggregate(db, ["h1", "h2", "h3"])
    computes, notifier = FakeComputes(), FakeNotifier()
    job = make_precacher(conf, db, computes, pools, notifier).start(
        _ctxt(), agg_id, [IMG_A, IMG_B])

    assert job["state"] == jobs.QUEUED and job["total_hosts"] == 3
    done = jobs.job_get(db, job["uuid"])
    assert done["state"] == jobs.DONE and done["error"] is None
    assert results_by_host(db, job["uuid"]) == {
        h: {IMG_A: ("cached", None), IMG_B: ("cached", None)} for h in ("h1", "h2", "h3")
    }
    assert all(r["bytes_downloaded"] == 10 for r in done["results"])
    assert sorted(computes.cells) == ["cell1", "cell1", "cell2"]
    assert [e for e, _ in notifier.sent][0] == notifications.START
    assert [e for e, _ in notifier.sent][-1] == notifications.END
    progress = notifier.events(notifications.PROGRESS)
    assert sorted(p["index"] for p in progress) == [1, 2, 3]
    assert {p["total"] for p in progress} == {3}
    assert progress[0]["images_cached"] == [IMG_A, IMG_B] and progress[0]["images_failed"] == []
    assert progress[0]["job_uuid"] == job["uuid"] and progress[0]["name"] == "agg1"


def test_images_looked_up_once_in_order_and_hosts_called_in_aggregate_order(conf, db, pools):
    agg_id = make_aggregate(db, ["h1", "h2", "h3"])
    computes = FakeComputes()
    precacher = make_precacher(conf, db, computes, pools)
    images = precacher.images
    precacher.start(_ctxt(), agg_id, [IMG_B, IMG_A, IMG_B])

    assert images.shown == [IMG_B, IMG_A]  # type: ignore[attr-defined]
    assert computes.calls == [(h, [IMG_B, IMG_A]) for h in ("h1", "h2", "h3")]


def test_the_job_names_images_as_the_image_service_does(conf, db, pools):
    agg_id = make_aggregate(db, ["h1", "h2"])
    computes = FakeComputes()
    job = make_precacher(conf, db, computes, pools).start(
        _ctxt(), agg_id, [IMG_A.upper(), IMG_A, IMG_B.upper()])

    assert job["image_ids"] == [IMG_A, IMG_B]  # one entry per image
    assert computes.calls == [(h, [IMG_A, IMG_B]) for h in ("h1", "h2")]
    assert results_by_host(db, job["uuid"])["h1"] == {IMG_A: ("cached", None),
                                                      IMG_B: ("cached", None)}


def test_missing_image_fails_before_any_host_and_leaves_no_job(conf, db, pools):
    agg_id = make_aggregate(db, ["h1", "h2"])
    computes, notifier = FakeComputes(), FakeNotifier()
    with pytest.raises(exception.ImageNotFound):
        make_precacher(conf, db, computes, pools, notifier).start(
            _ctxt(), agg_id, [IMG_A, IMG_MISSING])
    assert computes.calls == []
    assert jobs.job_list(db) == []
    assert notifier.sent == []


def test_unknown_aggregate_is_not_found(conf, db, pools):
    with pytest.raises(exception.AggregateNotFound):
        make_precacher(conf, db, FakeComputes(), pools).start(_ctxt(), 42, [IMG_A])
    assert jobs.job_list(db) == []


def test_down_and_disabled_hosts_are_skipped_with_why(conf, db, pools):
    agg_id = make_aggregate(db, ["up", "down", "off"])
    db_services.service_update(db, service_id(db, "down"), forced_down=True)
    db_services.service_update(db, service_id(db, "off"), disabled=True)
    computes, notifier = FakeComputes(), FakeNotifier()
    job = make_precacher(conf, db, computes, pools, notifier).start(_ctxt(), agg_id, [IMG_A])

    assert [h for h, _ in computes.calls] == ["up"]
    assert results_by_host(db, job["uuid"]) == {
        "up": {IMG_A: ("cached", None)},
        "down": {IMG_A: ("skipped", "down")},
        "off": {IMG_A: ("skipped", "disabled")},
    }
    progress = notifier.events(notifications.PROGRESS)
    assert len(progress) == 3
    skipped = [p for p in progress if p["host"] == "down"][0]
    assert skipped["images_failed"] == [IMG_A] and skipped["images_cached"] == []


def test_host_without_compute_service_is_error(conf, db, pools):
    agg_id = make_aggregate(db, ["h1", "gone"])
    with db.transaction() as session:  # no fleetcache command deletes a service; SQL can
        session.execute(delete(models.Service).where(models.Service.host == "gone"))
    computes = FakeComputes()
    job = make_precacher(conf, db, computes, pools).start(_ctxt(), agg_id, [IMG_A])

    assert [h for h, _ in computes.calls] == ["h1"]
    assert results_by_host(db, job["uuid"])["gone"] == {
        IMG_A: ("error", "host has no compute service")
    }
    assert jobs.job_get(db, job["uuid"])["state"] == jobs.DONE


def _raise(exc: Exception) -> Callable[[list[str]], Any]:
    def fail(image_ids: list[str]) -> Any:
        raise exc
    return fail


def test_rpc_timeout_and_failure_are_that_hosts_error(conf, db, pools):
    agg_id = make_aggregate(db, ["ok", "slow", "broken"])
    computes, notifier = FakeComputes({
        "slow": _raise(messaging.MessagingTimeout("Timed out waiting for a reply")),
        "broken": _raise(RuntimeError("connection reset")),
    }), FakeNotifier()
    job = make_precacher(conf, db, computes, pools, notifier).start(
        _ctxt(), agg_id, [IMG_A, IMG_B])

    results = results_by_host(db, job["uuid"])
    assert results["ok"][IMG_A] == ("cached", None)
    assert results["slow"] == {
        i: ("error", "MessagingTimeout: Timed out waiting for a reply") for i in (IMG_A, IMG_B)
    }
    assert results["broken"][IMG_B] == ("error", "RuntimeError: connection reset")
    assert len(notifier.events(notifications.PROGRESS)) == 3
    assert jobs.job_get(db, job["uuid"])["state"] == jobs.DONE


def test_a_job_that_breaks_midway_stores_the_calls_it_made_and_ends_every_host(
        conf, db, pools, monkeypatch, caplog):
    """The database fails on the second page of service lookups: the first page's calls,
    still in flight, are stored and notified, the other hosts are errors saying why, and
    the job is ``failed``."""
    monkeypatch.setattr(precache, "LOOKUP_PAGE", 2)
    agg_id = make_aggregate(db, ["h0", "h1", "h2", "h3"])
    computes, notifier = FakeComputes(delay=0.3), FakeNotifier()
    precacher = make_precacher(conf, db, computes, pools, notifier)
    plan_hosts = precacher.plan_hosts
    pages = []

    def failing_second_page(*args: Any) -> Any:
        pages.append(args[1])
        if len(pages) == 2:
            raise OperationalError("SELECT services", {}, Exception("server has gone away"))
        return plan_hosts(*args)

    precacher.plan_hosts = failing_second_page  # type: ignore[method-assign]
    job = precacher.start(_ctxt(), agg_id, [IMG_A])

    stored = wait_done(db, job["uuid"])
    assert stored["state"] == jobs.FAILED and "server has gone away" in stored["error"]
    results = results_by_host(db, job["uuid"])
    assert results["h0"] == results["h1"] == {IMG_A: ("cached", None)}
    for host in ("h2", "h3"):
        state, reason = results[host][IMG_A]
        assert state == "error" and reason.startswith("not asked: the job broke: ")
    assert sorted(h for h, _ in computes.calls) == ["h0", "h1"]
    assert len(notifier.events(notifications.PROGRESS)) == 4
    assert "came after the job stopped storing" not in caplog.text


def test_invalid_reply_is_error_for_the_images_it_lacks(conf, db, pools):
    agg_id = make_aggregate(db, ["h1"])
    computes = FakeComputes({"h1": lambda ids: {IMG_A: {"state": "existing", "reason": None,
                                                        "bytes_downloaded": 0}}})
    job = make_precacher(conf, db, computes, pools).start(_ctxt(), agg_id, [IMG_A, IMG_B])
    results = results_by_host(db, job["uuid"])["h1"]
    assert results[IMG_A] == ("existing", None)
    assert results[IMG_B][0] == "error"
    assert results[IMG_B][1].startswith("compute returned no valid result")


def test_summary_line_and_warning_per_failed_image(conf, db, pools, caplog):
    agg_id = make_aggregate(db, ["cached", "mixed", "down", "dead"])
    db_services.service_update(db, service_id(db, "down"), forced_down=True)
    computes = FakeComputes({
        "mixed": lambda ids: {IMG_A: {"state": "unsupported", "reason": "no cache",
                                      "bytes_downloaded": 0},
                              IMG_B: {"state": "existing", "reason": None,
                                      "bytes_downloaded": 0}},
        "dead": _raise(messaging.MessagingTimeout("gone")),
    })
    caplog.set_level(logging.INFO, logger="fleetcache.conductor.precache.job")
    job = make_precacher(conf, db, computes, pools).start(_ctxt(), agg_id, [IMG_A, IMG_B])

    infos = [r.getMessage() for r in caplog.records if "completed in" in r.getMessage()]
    assert len(infos) == 1
    assert re.fullmatch(
        rf"Image pre-cache job {job['uuid']} on aggregate {agg_id} completed in \d+\.\d\d s: "
        r"2 cached, 1 existing, 2 errors, 1 unsupported, 1 skipped hosts",
        infos[0],
    )
    warnings = sorted(r.getMessage() for r in caplog.records
                      if r.levelno == logging.WARNING and "failed 1 times" in r.getMessage())
    assert warnings == sorted(f"Image {i} failed 1 times in pre-cache job {job['uuid']}"
                              for i in (IMG_A, IMG_B))


def test_concurrency_limit_is_shared_by_concurrent_jobs(conf, db, pools):
    conf.set_override("precache_concurrency", 3, group="image_cache")
    hosts = [f"h{n}" for n in range(8)]
    agg_id = make_aggregate(db, hosts)
    computes = FakeComputes(delay=0.1)
    precacher = make_precacher(conf, db, computes, pools, sync=False)
    assert precacher.host_calls.size == 3

    first = precacher.start(_ctxt(), agg_id, [IMG_A])
    second = precacher.start(_ctxt(), agg_id, [IMG_B])
    for job in (first, second):
        assert wait_done(db, job["uuid"])["state"] == jobs.DONE
    assert len(computes.calls) == 16
    assert computes.max_in_flight == 3


def test_progress_index_counts_every_host_once_in_order_under_concurrency(conf, db,
                                                                          pools):
    hosts = [f"h{n:02d}" for n in range(40)]
    agg_id = make_aggregate(db, hosts)
    db_services.service_update(db, service_id(db, "h07"), forced_down=True)
    notifier = FakeNotifier()
    precacher = make_precacher(conf, db, FakeComputes(delay=0.01), pools, notifier,
                               host_calls=pools.host_calls(16))
    job = precacher.start(_ctxt(), agg_id, [IMG_A])

    progress = notifier.events(notifications.PROGRESS)
    assert [p["index"] for p in progress] == list(range(1, 41))  # sent in index order
    assert sorted(p["host"] for p in progress) == hosts
    assert {p["total"] for p in progress} == {40}
    assert len(jobs.job_get(db, job["uuid"])["results"]) == 40


def test_job_that_cannot_store_results_ends_failed_with_end_notification(
        conf, db, pools, monkeypatch):
    agg_id = make_aggregate(db, ["h1"])

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(jobs, "job_record_hosts", broken)
    notifier = FakeNotifier()
    job = make_precacher(conf, db, FakeComputes(), pools, notifier).start(
        _ctxt(), agg_id, [IMG_A])

    done = jobs.job_get(db, job["uuid"])
    assert done["state"] == jobs.FAILED
    assert done["error"] == "could not store results: disk full"
    assert [e for e, _ in notifier.sent][-1] == notifications.END


def test_stopped_pool_interrupts_the_job_and_settles_every_host(conf, db, pools):
    agg_id = make_aggregate(db, ["h1", "h2"])
    host_calls = pools.host_calls()
    host_calls.shutdown()
    job = make_precacher(conf, db, FakeComputes(), pools, host_calls=host_calls).start(
        _ctxt(), agg_id, [IMG_A])

    done = jobs.job_get(db, job["uuid"])
    assert done["state"] == jobs.FAILED and done["error"].startswith("interrupted")
    assert {r["host"]: r["state"] for r in done["results"]} == {"h1": "error", "h2": "error"}


def test_result_writer_batches_what_arrives_meanwhile(db, monkeypatch):
    job = jobs.job_create(db, 1, "agg-uuid", [IMG_A], 450, "conductor1")
    batches: list[int] = []
    real = jobs.job_record_hosts

    def counting(db_: Database, uuid: str, results: Any) -> None:
        batches.append(len(results))
        real(db_, uuid, results)

    monkeypatch.setattr(jobs, "job_record_hosts", counting)
    writer = jobresults.ResultWriter(db, job["uuid"], max_batch=200)
    for n in range(450):
        writer.put(f"h{n}", {IMG_A: {"state": "cached", "reason": None, "bytes_downloaded": 1}})
    writer.start()
    assert writer.close() is None
    assert batches == [200, 200, 50]
    assert len(jobs.job_get(db, job["uuid"])["results"]) == 450


def test_result_writer_holds_back_results_beyond_its_queue_until_it_stores_some(db):
    job = jobs.job_create(db, 1, "agg-uuid", [IMG_A], 3, "conductor1")
    writer = jobresults.ResultWriter(db, job["uuid"], max_queue=2)
    result: dict[str, Any] = {IMG_A: {"state": "cached", "reason": None, "bytes_downloaded": 1}}
    writer.put("h0", result)
    writer.put("h1", result)
    third = threading.Thread(target=writer.put, args=("h2", result))
    third.start()
    third.join(0.3)
    assert third.is_alive()  # the queue is full and nothing stores: the third host waits

    writer.start()
    third.join(5)
    assert not third.is_alive()
    assert writer.close() is None
    assert sorted(r["host"] for r in jobs.job_get(db, job["uuid"])["results"]) == [
        "h0", "h1", "h2"]


def test_result_writer_says_so_of_results_that_come_after_it_closed(db, caplog):
    job = jobs.job_create(db, 1, "agg-uuid", [IMG_A], 1, "conductor1")
    writer = jobresults.ResultWriter(db, job["uuid"])
    writer.start()
    assert writer.close() is None
    with caplog.at_level(logging.WARNING, logger=jobresults.__name__):
        writer.put("late", {IMG_A: {"state": "cached", "reason": None, "bytes_downloaded": 1}})
    assert f"Results of late in image pre-cache job {job['uuid']} came after" in caplog.text
    assert jobs.job_get(db, job["uuid"])["results"] == []


def test_pool_stopped_mid_job_abandons_the_call_in_flight_and_ends_interrupted(conf, db, pools):
    agg_id = make_aggregate(db, ["h1", "h2", "h3"])
    pool = pools.host_calls(1)
    computes = FakeComputes(delay=3)
    job = make_precacher(conf, db, computes, pools, sync=False, host_calls=pool).start(
        _ctxt(), agg_id, [IMG_A])
    deadline = time.monotonic() + 5
    while not computes.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    stopped = time.monotonic()
    pool.shutdown(wait=False, cancel_futures=True)

    done = wait_done(db, job["uuid"])
    assert time.monotonic() - stopped < 2.5  # the call still in flight is not waited for
    assert done["state"] == jobs.FAILED and done["error"].startswith("interrupted")
    reason = "interrupted: the conductor stopped before this host answered"
    assert results_by_host(db, job["uuid"]) == {
        "h1": {IMG_A: ("error", reason)},  # in flight when the pool stopped: abandoned
        "h2": {IMG_A: ("error", reason)},
        "h3": {IMG_A: ("error", reason)},
    }
    assert done["finished_at"] is not None


def test_progress_is_sent_once_the_result_is_stored(conf, db, pools):
    agg_id = make_aggregate(db, ["h1", "h2"])
    seen: list[tuple[str, int]] = []

    class CheckingNotifier(FakeNotifier):
        def info(self, ctxt: Any, event_type: str, payload: dict[str, Any]) -> None:
            if event_type == notifications.PROGRESS:
                stored = {r["host"] for r in jobs.job_get(db, payload["job_uuid"])["results"]}
                seen.append((payload["host"], int(payload["host"] in stored)))
            super().info(ctxt, event_type, payload)

    make_precacher(conf, db, FakeComputes(), pools, CheckingNotifier()).start(
        _ctxt(), agg_id, [IMG_A])
    assert sorted(seen) == [("h1", 1), ("h2", 1)]


@pytest.fixture
def state(conf: cfg.ConfigOpts, db: Database) -> Iterator[ConductorState]:
    """The conductor's shared state as ``fleetcache-conductor`` builds it, stopped after."""
    transports = rpc.Transports(conf)
    built = ConductorState(conf, db, transports, images=FakeImages())  # type: ignore[arg-type]
    yield built
    built.shutdown(wait=True)
    transports.cleanup()


def test_manager_cache_images_checks_then_delegates(conf, db, pools, state):
    agg_id = make_aggregate(db, ["h1"])
    computes = FakeComputes()
    state.precacher = make_precacher(conf, db, computes, pools)
    manager = ConductorManager(state)

    with pytest.raises(messaging.ExpectedException) as raised:  # the caller's error
        manager.cache_images(_ctxt(), agg_id, [])
    assert isinstance(raised.value.exc_info[1], exception.InvalidInput)
    assert jobs.job_list(db) == []
    job = manager.cache_images(_ctxt(), str(agg_id), [IMG_A])  # type: ignore[arg-type]
    assert job["aggregate_id"] == agg_id and job["state"] == jobs.QUEUED
    assert computes.calls == [("h1", [IMG_A])]
    assert [j["uuid"] for j in jobs.job_list(db)] == [job["uuid"]]


def test_conductor_pools_come_from_configuration(conf, db):
    conf.set_override("precache_concurrency", 3, group="image_cache")
    conf.set_override("max_concurrent_jobs", 2, group="conductor")
    transports = rpc.Transports(conf)
    state = ConductorState(conf, db, transports)
    try:
        assert state.precacher.host_calls is state.host_calls
        assert state.host_calls.size == 3
        assert state.job_coordinators.submit(lambda: 42).result(timeout=5) == 42
    finally:
        state.shutdown(wait=True)
        transports.cleanup()
    assert state.host_calls.stopping.is_set()
    with pytest.raises(RuntimeError):
        state.job_coordinators.submit(lambda: None)


def test_a_job_beyond_max_concurrent_jobs_stays_queued_until_a_coordinator_is_free(
        conf, db, pools):
    conf.set_override("max_concurrent_jobs", 1, group="conductor")
    conf.set_override("precache_concurrency", 2, group="image_cache")
    agg_id = make_aggregate(db, ["h1"])
    release = threading.Event()
    computes = FakeComputes({"h1": lambda ids: release.wait(10) and {
        i: {"state": "cached", "reason": None, "bytes_downloaded": 1} for i in ids}})
    transports = rpc.Transports(conf)
    state = ConductorState(conf, db, transports)
    try:
        precacher = make_precacher(conf, db, computes, pools, host_calls=state.host_calls,
                                   job_runner=state.job_coordinators.submit)
        first = precacher.start(_ctxt(), agg_id, [IMG_A])
        deadline = time.monotonic() + 5
        while not computes.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        second = precacher.start(_ctxt(), agg_id, [IMG_B])
        time.sleep(0.3)
        assert jobs.job_get(db, first["uuid"])["state"] == jobs.RUNNING
        assert jobs.job_get(db, second["uuid"])["state"] == jobs.QUEUED
        assert len(computes.calls) == 1  # the first job's only host, still answering
        release.set()
        assert wait_done(db, first["uuid"])["state"] == jobs.DONE
        assert wait_done(db, second["uuid"])["state"] == jobs.DONE
    finally:
        release.set()
        state.shutdown(wait=True)
        transports.cleanup()


def test_download_path_and_fallback_reason_are_stored_and_optional(conf, db, pools):
    agg_id = make_aggregate(db, ["new", "old"])
    computes = FakeComputes({
        "new": lambda ids: {
            IMG_A: {"state": "cached", "reason": None, "bytes_downloaded": 5,
                    "download_path": "rbd", "fallback_reason": None},
            IMG_B: {"state": "cached", "reason": None, "bytes_downloaded": 5,
                    "download_path": "http", "fallback_reason": "fsid mismatch: x"}},
        # a compute from before the fields existed
        "old": lambda ids: {i: {"state": "cached", "reason": None, "bytes_downloaded": 5}
                            for i in ids},
    })
    job = make_precacher(conf, db, computes, pools).start(_ctxt(), agg_id, [IMG_A, IMG_B])
    stored = {(r["host"], r["image_id"]): (r["download_path"], r["fallback_reason"])
              for r in jobs.job_get(db, job["uuid"])["results"]}
    assert stored == {("new", IMG_A): ("rbd", None),
                      ("new", IMG_B): ("http", "fsid mismatch: x"),
                      ("old", IMG_A): (None, None), ("old", IMG_B): (None, None)}


def test_hosts_are_looked_up_a_page_at_a_time_and_calls_stay_bounded(conf, db, pools,
                                                                     monkeypatch):
    """A job holds one page of service rows and at most twice the pool's size of submitted
    calls, whatever the aggregate's size; every host still gets exactly one outcome."""
    hosts = [f"h{n:02d}" for n in range(11)]
    agg_id = make_aggregate(db, hosts)
    with db.transaction() as session:
        session.execute(delete(models.Service).where(models.Service.host == "h05"))
    pages: list[list[str]] = []
    lookup = precacher.compute_states

    def recording_lookup(db_: Database, page: list[str], binary: str) -> Any:
        pages.append(list(page))
        return lookup(db_, page, binary)

    monkeypatch.setattr(precache, "LOOKUP_PAGE", 4)
    monkeypatch.setattr(precacher, "compute_states", recording_lookup)
    host_calls = pools.host_calls(1)
    submitted = []
    real_run = host_calls.run

    waiting: list[int] = []  # calls submitted and not started, at each submit

    def counting_run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        waiting.append(len(submitted) - len(computes.calls))
        submitted.append(args[1].host)  # (position, plan, client)
        real_run(fn, *args, **kwargs)

    monkeypatch.setattr(host_calls, "run", counting_run)
    computes = FakeComputes(delay=0.01)
    job = make_precacher(conf, db, computes, pools, host_calls=host_calls).start(
        _ctxt(), agg_id, [IMG_A])

    assert pages == [hosts[0:4], hosts[4:8], hosts[8:11]]
    assert sorted(h for h, _ in computes.calls) == [h for h in hosts if h != "h05"]
    assert computes.max_in_flight == 1
    assert len(submitted) == 10 and max(waiting) <= 2  # 2 x the pool's size, not all 10
    results = results_by_host(db, job["uuid"])
    assert set(results) == set(hosts)
    assert results["h05"] == {IMG_A: ("error", "host has no compute service")}
    assert jobs.job_get(db, job["uuid"])["state"] == jobs.DONE


def test_a_finished_job_goes_with_its_last_reference_not_the_garbage_collector(
        conf, db, pools, monkeypatch):
    """No reference cycle through the job's host caller (it holds the job's ``_host_done``):
    a finished job's host list and results go at once, not at the next full collection."""
    made: list[weakref.ref[precache.PrecacheJob]] = []
    init = precache.PrecacheJob.__init__

    def recording_init(job: precache.PrecacheJob, *args: Any, **kwargs: Any) -> None:
        init(job, *args, **kwargs)
        made.append(weakref.ref(job))

    monkeypatch.setattr(precache.PrecacheJob, "__init__", recording_init)
    agg_id = make_aggregate(db, ["h1", "h2", "h3"])
    gc.collect()
    gc.disable()
    try:
        make_precacher(conf, db, FakeComputes(), pools).start(_ctxt(), agg_id, [IMG_A])
        deadline = time.monotonic() + 5  # the last worker lets go of its call just after
        while made[0]() is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert made[0]() is None
    finally:
        gc.enable()


def test_the_end_notification_says_where_the_downloads_came_from(conf, db, pools):
    agg_id = make_aggregate(db, ["h1", "h2"])
    computes, notifier = FakeComputes({
        "h1": lambda ids: {i: {"state": "cached", "reason": None, "bytes_downloaded": 10,
                               "download_path": "http"} for i in ids},
        "h2": lambda ids: {i: {"state": "cached", "reason": None, "bytes_downloaded": 10,
                               "download_path": "peer", "source_host": "h1",
                               "bytes_from_peers": 10} for i in ids},
    }), FakeNotifier()
    job = make_precacher(conf, db, computes, pools, notifier).start(_ctxt(), agg_id, [IMG_A])

    (end,) = notifier.events(notifications.END)
    assert end["job_uuid"] == job["uuid"]
    distribution = end["distribution"]
    assert (distribution["origin_copies"], distribution["peer_copies"]) == (1, 1)
    assert (distribution["bytes_from_origin"], distribution["bytes_from_peers"]) == (10, 10)
    assert distribution["offload_percent"] == 50.0
    assert distribution["time_to_all_hosts"] is not None
