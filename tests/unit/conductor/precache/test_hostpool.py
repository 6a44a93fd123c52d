"""Unit tests of the conductor's bounded pool (fleetcache.conductor.precache.hostpool)."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import threading
import time

import pytest

from fleetcache.conductor.precache.hostpool import HostCallPool


def test_runs_at_most_size_at_once_and_returns_results():
    pool = HostCallPool(3)
    lock, state = threading.Lock(), {"now": 0, "max": 0}

    def work(n: int) -> int:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.02)
        with lock:
            state["now"] -= 1
        return n * 2

    futures = [pool.submit(work, n) for n in range(20)]
    assert [f.result(timeout=10) for f in futures] == [n * 2 for n in range(20)]
    assert state["max"] == 3
    assert pool.threads == 3
    pool.shutdown()


def test_reuses_an_idle_worker_instead_of_starting_another():
    pool = HostCallPool(8)
    for n in range(10):
        assert pool.submit(lambda x: x, n).result(timeout=5) == n
        time.sleep(0.01)  # the worker is idle again before the next submit
    assert pool.threads == 1
    pool.shutdown()


def test_exceptions_reach_the_future():
    pool = HostCallPool(1)
    future = pool.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        future.result(timeout=5)
    pool.shutdown()


def test_shutdown_cancels_queued_work_and_refuses_more():
    pool = HostCallPool(1)
    release = threading.Event()
    running = pool.submit(release.wait, 5)
    queued = [pool.submit(lambda: None) for _ in range(3)]
    time.sleep(0.05)
    pool.shutdown(wait=False, cancel_futures=True)
    assert all(f.cancelled() for f in queued)
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)
    release.set()
    assert running.result(timeout=5) is True
    done, _ = concurrent.futures.wait([running, *queued], timeout=5)
    assert len(done) == 4


def test_a_busy_worker_does_not_hold_the_interpreter_at_exit():
    code = ("import time\nfrom fleetcache.conductor.precache.hostpool import HostCallPool\n"
            "HostCallPool(1).submit(time.sleep, 60)\ntime.sleep(0.2)\n")
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
    assert time.monotonic() - started < 10


def test_run_queues_work_without_a_future_within_the_same_bound():
    pool = HostCallPool(2)
    lock, state = threading.Lock(), {"now": 0, "max": 0, "done": 0}
    finished = threading.Event()

    def work() -> None:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.02)
        with lock:
            state["now"] -= 1
            state["done"] += 1
            if state["done"] == 8:
                finished.set()

    assert [pool.run(work) for _ in range(8)] == [None] * 8
    assert finished.wait(10)
    assert state["max"] == 2
    assert pool.threads == 2
    pool.shutdown()


def test_run_logs_an_error_and_the_worker_goes_on(caplog):
    pool = HostCallPool(1)
    pool.run(lambda: 1 / 0)
    assert pool.submit(lambda: "still working").result(timeout=5) == "still working"
    assert pool.threads == 1
    assert "Unexpected error in precache worker" in caplog.text
    assert "ZeroDivisionError" in caplog.text
    pool.shutdown()


def test_shutdown_drops_queued_runs_and_refuses_more():
    pool = HostCallPool(1)
    release = threading.Event()
    ran: list[int] = []
    pool.run(release.wait, 5)
    for n in range(3):
        pool.run(ran.append, n)
    time.sleep(0.05)
    pool.shutdown(wait=False, cancel_futures=True)
    release.set()
    time.sleep(0.1)
    assert ran == []
    with pytest.raises(RuntimeError):
        pool.run(ran.append, 9)


def _blocked_pool() -> tuple[HostCallPool, threading.Event]:
    """A pool of one worker, busy until the event is set."""
    pool = HostCallPool(1)
    release, started = threading.Event(), threading.Event()
    pool.run(lambda: (started.set(), release.wait(5)))
    assert started.wait(5)
    return pool, release


def test_queued_work_of_a_higher_priority_runs_first():
    pool, release = _blocked_pool()
    ran: list[str] = []
    pool.run(ran.append, "low", priority=10)
    pool.run(ran.append, "default")
    pool.run(ran.append, "high", priority=90)
    last = pool.submit(ran.append, "submitted")  # the default priority, after "default"
    release.set()
    last.result(timeout=5)
    pool.shutdown()
    assert ran == ["high", "default", "submitted", "low"]


def test_equal_priorities_run_in_the_order_they_were_queued():
    pool, release = _blocked_pool()
    ran: list[int] = []
    for n in range(20):
        pool.run(ran.append, n, priority=70 if n % 2 else 30)
    release.set()
    pool.shutdown()  # waits: the queued work runs before the workers exit
    assert ran == list(range(1, 20, 2)) + list(range(0, 20, 2))


def test_shutdown_wakes_every_worker_after_the_queued_work():
    pool = HostCallPool(4)
    release = threading.Event()
    ran: list[int] = []
    for _ in range(4):
        pool.run(release.wait, 5)
    for n in range(6):
        pool.run(ran.append, n, priority=n)
    assert pool.threads == 4
    threading.Timer(0.1, release.set).start()
    pool.shutdown()  # returns only once all four workers have exited
    assert sorted(ran) == list(range(6))
    assert all(not thread.is_alive() for thread in pool._threads)
