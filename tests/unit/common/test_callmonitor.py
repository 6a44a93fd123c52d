"""Tests of fleetcache.common.callmonitor: one thread heartbeats every call in progress.

The heartbeats over a real broker (a call longer than the caller's monitor timeout survives)
are shown by tests/integration/test_compute_long_calls.py.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import oslo_messaging as messaging

from fleetcache.common.callmonitor import CallMonitor, MonitoredDispatcher


class _Incoming:
    """What the monitor and the dispatcher use of an oslo.messaging incoming message."""

    def __init__(self, client_timeout: Any, fail: bool = False) -> None:
        self.client_timeout = client_timeout
        self.message = {"method": "work", "args": {}}
        self.ctxt: dict[str, Any] = {}
        self.beats: list[float] = []
        self.fail = fail

    def heartbeat(self) -> None:
        self.beats.append(time.monotonic())
        if self.fail:
            raise OSError("broker gone")


def test_heartbeats_every_half_timeout_until_forgotten() -> None:
    monitor = CallMonitor()
    try:
        started = time.monotonic()
        slow, fast = _Incoming(2), _Incoming(4)
        slow_call = monitor.watch(slow, slow.client_timeout)
        fast_call = monitor.watch(fast, fast.client_timeout)
        assert monitor.watched == 2
        time.sleep(2.4)
        monitor.forget(slow_call)
        time.sleep(2.0)
        monitor.forget(fast_call)
        assert monitor.watched == 0
        # Intervals of 1 and 2 s: beats at 1, 2 and at 2, 4 s; none once forgotten (2.4, 4.4 s).
        assert all(b - started >= due for b, due in zip(slow.beats, (1, 2), strict=True))
        assert all(b - started >= due for b, due in zip(fast.beats, (2, 4), strict=True))
    finally:
        monitor.stop()


def test_a_call_shorter_than_its_interval_gets_no_heartbeat() -> None:
    monitor = CallMonitor()
    try:
        calls = [_Incoming(60) for _ in range(1000)]
        handles = [monitor.watch(c, 60) for c in calls]
        for handle in handles:
            monitor.forget(handle)
        assert monitor.watched == 0
        assert not any(c.beats for c in calls)
    finally:
        monitor.stop()


def test_a_failed_heartbeat_stops_that_calls_heartbeats_only() -> None:
    monitor = CallMonitor()
    try:
        broken, fine = _Incoming(2, fail=True), _Incoming(2)
        monitor.watch(broken, 2)
        fine_call = monitor.watch(fine, 2)
        time.sleep(2.4)
        assert len(broken.beats) == 1
        assert len(fine.beats) == 2
        assert monitor.watched == 1
        monitor.forget(fine_call)
    finally:
        monitor.stop()


def test_invalid_timeouts_are_refused_as_oslo_messaging_refuses_them() -> None:
    monitor = CallMonitor()
    assert monitor.watch(_Incoming("soon"), "soon") is None
    assert monitor.watch(_Incoming(1), 1) is None  # an interval under 1 s
    assert monitor.watched == 0
    monitor.forget(None)


class _Endpoint:
    target = messaging.Target(version="1.0")

    def __init__(self, monitor: CallMonitor) -> None:
        self.monitor = monitor
        self.watched_during_call = -1
        self.threads_during_call = -1

    def work(self, ctxt: Any) -> str:
        self.watched_during_call = self.monitor.watched
        self.threads_during_call = threading.active_count()
        return "done"


def test_the_dispatcher_watches_the_call_without_a_thread_of_its_own() -> None:
    monitor = CallMonitor()
    try:
        endpoint = _Endpoint(monitor)
        dispatcher = MonitoredDispatcher([endpoint], None, None, monitor)
        incoming = _Incoming(60)
        monitor.watch(_Incoming(60), 60)  # start the monitor's thread before counting
        threads = threading.active_count()
        assert dispatcher.dispatch(incoming) == "done"
        assert endpoint.watched_during_call == 2
        assert endpoint.threads_during_call == threads  # no watchdog thread per call
        assert monitor.watched == 1
        assert incoming.client_timeout == 60  # handed back as it came
        # A caller without a monitor timeout is not watched.
        assert dispatcher.dispatch(_Incoming(None)) == "done"
        assert endpoint.watched_during_call == 1
    finally:
        monitor.stop()
