"""Tests of fleetcache.common.service: the runner, its signal handling and the reporter."""

from __future__ import annotations

import faulthandler
import os
import pathlib
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from fleetcache.common import service as service_mod
from fleetcache.common.service import Service, ServiceReporter


class FakeServer:
    """Records start/stop/wait like an oslo.messaging RPC server; ``wait`` takes ``delay``."""

    def __init__(self, delay: float = 0.0, fail_start: bool = False) -> None:
        self.delay = delay
        self.fail_start = fail_start
        self.events: list[str] = []

    def start(self) -> None:
        if self.fail_start:
            raise RuntimeError("broker unreachable")
        self.events.append("start")

    def stop(self) -> None:
        self.events.append("stop")

    def wait(self) -> None:
        time.sleep(self.delay)
        self.events.append("wait")


@pytest.fixture(autouse=True)
def _no_stop_dump_left() -> Iterator[None]:
    """``run()`` arms the process's stack dump on a signal: disarm it after each test."""
    yield
    faulthandler.cancel_dump_traceback_later()


def _until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_start_then_stop_runs_every_server_through_its_lifecycle() -> None:
    servers = [FakeServer(), FakeServer()]
    service = Service("test")
    for i, server in enumerate(servers):
        service.add_server(f"s{i}", server)
    service.start()
    service.stop()
    assert [s.events for s in servers] == [["start", "stop", "wait"]] * 2
    assert service.servers == {}


def test_servers_stop_in_parallel() -> None:
    servers = [FakeServer(delay=0.5) for _ in range(4)]
    service = Service("test")
    for i, server in enumerate(servers):
        service.add_server(f"s{i}", server)
    service.start()
    began = time.monotonic()
    service.stop()
    assert time.monotonic() - began < 1.5  # serially it would be 2 s
    assert all(s.events[-1] == "wait" for s in servers)


def test_stop_gives_up_on_a_server_that_does_not_finish() -> None:
    slow = FakeServer(delay=5)
    service = Service("test", stop_timeout=0.2)
    service.add_server("slow", slow)
    service.start()
    began = time.monotonic()
    service.stop()
    assert time.monotonic() - began < 1.0
    assert slow.events == ["start", "stop"]


def test_server_added_while_running_starts_at_once_and_can_be_removed() -> None:
    service = Service("test")
    service.start()
    late = FakeServer()
    service.add_server("late", late)
    assert late.events == ["start"]
    service.remove_server("late")
    assert late.events == ["start", "stop", "wait"]
    assert "late" not in service.servers
    service.stop()


def test_duplicate_server_key_is_refused() -> None:
    service = Service("test")
    service.add_server("a", FakeServer())
    with pytest.raises(ValueError, match="already registered"):
        service.add_server("a", FakeServer())


def test_failed_start_stops_servers_already_started_and_raises() -> None:
    good, bad = FakeServer(), FakeServer(fail_start=True)
    service = Service("test")
    service.add_server("good", good)
    service.add_server("bad", bad)
    with pytest.raises(RuntimeError, match="broker unreachable"):
        service.start()
    assert good.events == ["start", "stop", "wait"]


def test_server_failing_to_start_while_running_is_not_kept() -> None:
    service = Service("test")
    service.start()
    with pytest.raises(RuntimeError):
        service.add_server("bad", FakeServer(fail_start=True))
    assert "bad" not in service.servers
    service.add_server("bad", FakeServer())  # the key can be used again
    service.stop()


def test_periodic_task_repeats_survives_errors_and_honours_returned_delay() -> None:
    calls: list[float] = []

    def task() -> float:
        calls.append(time.monotonic())
        if len(calls) == 2:
            raise RuntimeError("transient")
        return 0.05

    service = Service("test")
    service.add_periodic("t", task, interval=0.05)
    service.start()
    assert _until(lambda: len(calls) >= 4)
    service.stop()
    count = len(calls)
    time.sleep(0.2)
    assert len(calls) == count  # stopped means stopped


def test_periodic_task_waits_initial_delay() -> None:
    calls: list[int] = []
    service = Service("test")
    service.add_periodic("t", lambda: calls.append(1) and None, interval=10, initial_delay=0.3)
    service.start()
    time.sleep(0.1)
    assert calls == []
    assert _until(lambda: calls == [1])
    service.stop()


def test_sigterm_stops_the_service_and_run_returns_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    server = FakeServer()
    service = Service("test")
    service.add_server("s", server)
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    timer = threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGTERM))
    timer.start()
    assert service.run() == 0
    assert server.events == ["start", "stop", "wait"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handler restored


def test_run_notifies_systemd(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    threading.Timer(0.3, os.kill, args=(os.getpid(), signal.SIGINT)).start()
    try:
        assert Service("test").run() == 0
        assert sock.recv(100) == b"READY=1"
        assert sock.recv(100) == b"STOPPING=1"
    finally:
        sock.close()


def test_sd_notify_without_systemd_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert service_mod.sd_notify("READY=1") is False


# -- ServiceReporter ---------------------------------------------------------------------------


class Forgotten(Exception):
    pass


class Conductor:
    """Answers registrations and heartbeats as scripted; a heartbeat takes
    ``heartbeat_seconds`` of the fake clock ``now``."""

    def __init__(self) -> None:
        self.register_errors: list[Exception] = []
        self.heartbeat_errors: list[Exception] = []
        self.calls: list[str] = []
        self.now = 100.0
        self.heartbeat_seconds = 0.0

    def register(self) -> None:
        self.calls.append("register")
        if self.register_errors:
            raise self.register_errors.pop(0)

    def heartbeat(self) -> None:
        self.calls.append("heartbeat")
        self.now += self.heartbeat_seconds
        if self.heartbeat_errors:
            raise self.heartbeat_errors.pop(0)

    def clock(self) -> float:
        return self.now


def _reporter(conductor: Conductor, interval: float = 10) -> ServiceReporter:
    return ServiceReporter("svc", conductor.register, conductor.heartbeat, interval,
                           unknown=(Forgotten,), clock=conductor.clock)


def test_reporter_registers_first_then_heartbeats() -> None:
    conductor = Conductor()
    reporter = _reporter(conductor)
    assert reporter.run_once() == 10
    assert reporter.run_once() == 10
    assert conductor.calls == ["register", "heartbeat"]


def test_reporter_backs_off_exponentially_until_registered() -> None:
    conductor = Conductor()
    conductor.register_errors = [TimeoutError("no conductor")] * 5
    reporter = _reporter(conductor, interval=10)
    delays = [reporter.run_once() for _ in range(6)]
    assert delays == [1, 2, 4, 8, 10, 10]
    assert reporter.registered
    assert conductor.calls == ["register"] * 6


def test_reporter_registers_again_when_forgotten() -> None:
    conductor = Conductor()
    reporter = _reporter(conductor)
    reporter.run_once()
    conductor.heartbeat_errors = [Forgotten()]
    assert reporter.run_once() == 10
    assert conductor.calls == ["register", "heartbeat", "register"]
    assert reporter.registered


def test_reporter_keeps_registration_over_a_missed_heartbeat() -> None:
    conductor = Conductor()
    reporter = _reporter(conductor)
    reporter.run_once()
    conductor.heartbeat_errors = [TimeoutError("broker down")]
    assert reporter.run_once() == 10
    assert reporter.registered
    assert reporter.run_once() == 10
    assert conductor.calls == ["register", "heartbeat", "heartbeat"]


def test_reporter_beats_from_the_start_of_each_heartbeat() -> None:
    """A heartbeat that timed out (no conductor: the call waits its timeout, the interval)
    is tried again at once, so one is always queued for a conductor that comes back; a slow
    one that was answered shortens the wait by what it took."""
    conductor = Conductor()
    reporter = _reporter(conductor, interval=2)
    reporter.run_once()
    conductor.heartbeat_seconds = 2.0
    conductor.heartbeat_errors = [TimeoutError("no reply in 2 s")] * 2
    assert reporter.run_once() == 0
    assert reporter.run_once() == 0
    conductor.heartbeat_seconds = 0.5
    assert reporter.run_once() == 1.5
    assert conductor.calls == ["register"] + ["heartbeat"] * 3


def test_reporter_does_not_spin_when_a_heartbeat_fails_at_once() -> None:
    conductor = Conductor()
    reporter = _reporter(conductor, interval=2)
    reporter.run_once()
    conductor.heartbeat_errors = [ConnectionRefusedError("broker gone")]
    assert reporter.run_once() == 2


def test_server_added_after_stop_is_not_started() -> None:
    service = Service("test")
    service.start()
    service.stop()
    late = FakeServer()
    service.add_server("late", late)
    assert late.events == []
    assert service.servers == {}


def test_stop_does_not_wait_long_for_a_blocked_periodic_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(service_mod, "PERIODIC_STOP_TIMEOUT", 0.2)
    release = threading.Event()
    service = Service("test")
    service.add_periodic("blocked", lambda: release.wait(10) and None, interval=1)
    service.start()
    time.sleep(0.1)
    began = time.monotonic()
    service.stop()
    assert time.monotonic() - began < 1.0
    release.set()


def test_a_process_still_stopping_after_the_limit_writes_every_threads_stack() -> None:
    """The dump names what holds the stop up (here a server's ``wait``), and the process
    still ends normally when it does stop."""
    script = textwrap.dedent("""
        import os, signal, sys, threading, time
        from fleetcache.common.service import Service

        class SlowServer:
            def start(self): pass
            def stop(self): pass
            def wait(self): time.sleep(1.5)

        service = Service("slow", stop_dump_after=0.3)
        service.add_server("slow", SlowServer())
        threading.Timer(0.2, os.kill, args=(os.getpid(), signal.SIGTERM)).start()
        sys.exit(service.run())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Timeout (0:00:00.300000)!" in proc.stderr, proc.stderr
    assert 'line 8 in wait' in proc.stderr, proc.stderr
