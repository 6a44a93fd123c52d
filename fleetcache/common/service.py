"""The service runner of fleetcache's threading daemons (conductor and compute).

A :class:`Service` owns the RPC servers and periodic tasks of one process and stops them on
SIGTERM or SIGINT. There is no eventlet and no oslo.service launcher: each RPC server uses
oslo.messaging's threading executor, and each periodic task runs on its own thread so that a
slow task (a cell refresh) never delays another (the heartbeat).

Use::

    service = Service(binaries.COMPUTE)
    service.add_server("compute", rpc.get_server(transport, "compute", host, [manager]))
    service.add_periodic("report", reporter.run_once, conf.report_interval)
    return service.run()   # blocks until SIGTERM/SIGINT, then stops everything; returns 0

:class:`ServiceReporter` keeps a service registered and heartbeating, with backoff while nobody
answers, and registers again when the other side has forgotten the service.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

LOG = logging.getLogger(__name__)

#: Seconds ``stop()`` waits for a periodic task that is running at that moment.
PERIODIC_STOP_TIMEOUT = 5.0

#: Seconds after SIGTERM/SIGINT at which a process still running writes every thread's stack
#: to stderr (its log): what holds a stop up is then on record, even when a supervisor
#: (``tools/stack.sh``: SIGKILL 15 s after SIGTERM) kills it next.
STOP_DUMP_AFTER = 10.0

#: A periodic task; it may return the seconds until its next run instead of the interval.
PeriodicFunc = Callable[[], "float | None"]


def sd_notify(state: str) -> bool:
    """Tell systemd about ``state`` (``READY=1``, ``STOPPING=1``) when run as Type=notify.

    :returns: False when not started by systemd with a notify socket.
    """
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(state.encode(), address)
    except OSError:
        LOG.warning("Could not notify systemd at %s of %s", address, state)
        return False
    return True


class _Periodic:
    """One periodic task on its own thread; an exception is logged and the task runs again."""

    def __init__(
        self, name: str, func: PeriodicFunc, interval: float, initial_delay: float,
        stopping: threading.Event,
    ) -> None:
        self.name = name
        self.func = func
        self.interval = interval
        self.initial_delay = initial_delay
        self.stopping = stopping
        self.thread = threading.Thread(target=self._loop, name=f"periodic-{name}", daemon=True)

    def _loop(self) -> None:
        delay = self.initial_delay
        while not self.stopping.wait(delay):
            try:
                next_delay = self.func()
            except Exception:
                LOG.exception("Periodic task %s failed; it runs again in %.1f s",
                              self.name, self.interval)
                next_delay = None
            delay = self.interval if next_delay is None else max(0.0, next_delay)


class Service:
    """RPC servers plus periodic tasks, started together and stopped together.

    :param name: the binary name, for logs.
    :param stop_timeout: seconds to wait for in-flight RPC calls when stopping; calls still
        running after that are abandoned (the process exits anyway).
    :param stop_dump_after: after a signal, :meth:`run` has the process write every thread's
        stack to stderr if it still runs this many seconds later (``faulthandler``; the timer
        stays armed until the process exits, so it covers the clean-up after ``run`` too).
    """

    def __init__(self, name: str, stop_timeout: float = 60.0,
                 stop_dump_after: float = STOP_DUMP_AFTER) -> None:
        self.name = name
        self.stop_timeout = stop_timeout
        self.stop_dump_after = stop_dump_after
        self._servers: dict[str, Any] = {}
        self._periodics: list[_Periodic] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._started = False

    @property
    def servers(self) -> dict[str, Any]:
        """The RPC servers by key (a copy)."""
        with self._lock:
            return dict(self._servers)

    def add_server(self, key: str, server: Any) -> None:
        """Serve ``server`` under ``key``; started at once if the service already runs."""
        with self._lock:
            if self._stopping.is_set():
                LOG.info("%s: stopping; not starting RPC server %s", self.name, key)
                return
            if key in self._servers:
                raise ValueError(f"an RPC server {key!r} is already registered")
            self._servers[key] = server
            started = self._started
        if started:
            try:
                server.start()
            except BaseException:
                with self._lock:
                    self._servers.pop(key, None)
                raise
            LOG.info("%s: RPC server %s started", self.name, key)

    def remove_server(self, key: str) -> None:
        """Stop the RPC server ``key`` (waiting for its in-flight calls) and forget it."""
        with self._lock:
            server = self._servers.pop(key, None)
        if server is not None:
            _stop_servers({key: server}, self.stop_timeout)

    def add_periodic(
        self, name: str, func: PeriodicFunc, interval: float, initial_delay: float = 0.0
    ) -> None:
        """Run ``func`` every ``interval`` seconds (or after what it returns), from
        ``initial_delay`` after start."""
        task = _Periodic(name, func, interval, initial_delay, self._stopping)
        with self._lock:
            self._periodics.append(task)
            started = self._started
        if started:
            task.thread.start()

    def start(self) -> None:
        """Start every RPC server, then every periodic task.

        :raises Exception: whatever a server's ``start()`` raises (a broker that cannot be
            reached at all); servers already started are stopped again first.
        """
        with self._lock:
            servers = dict(self._servers)
            periodics = list(self._periodics)
            self._started = True
        started: dict[str, Any] = {}
        try:
            for key, server in servers.items():
                server.start()
                started[key] = server
                LOG.info("%s: RPC server %s started", self.name, key)
        except BaseException:
            _stop_servers(started, self.stop_timeout)
            raise
        for task in periodics:
            task.thread.start()

    def stop(self) -> None:
        """Stop the periodic tasks, then every RPC server in parallel (idempotent).

        NOTE: ``stop()`` plus ``wait()`` of one oslo.messaging server takes 1.0-1.6 s (its
        futurist workers notice the stop only after their 1 s idle poll; measured with
        oslo.messaging 18.3: 100 servers stopped one after the other took 160 s, side by side
        4.5 s), so the servers are stopped side by side.
        """
        self._stopping.set()
        with self._lock:
            servers, self._servers = self._servers, {}
            periodics = list(self._periodics)
            self._started = False
        # NOTE: a task blocked in an RPC call (broker down) is not waited for long: its thread
        # is a daemon and the call's result no longer matters.
        for task in periodics:
            if task.thread.is_alive() and task.thread is not threading.current_thread():
                task.thread.join(timeout=PERIODIC_STOP_TIMEOUT)
        _stop_servers(servers, self.stop_timeout)
        LOG.info("%s: stopped", self.name)

    def wait_for_signal(self) -> int:
        """Block until SIGTERM or SIGINT (main thread only). :returns: the signal number."""
        received: list[int] = []
        done = threading.Event()

        def _handler(signum: int, _frame: FrameType | None) -> None:
            received.append(signum)
            done.set()

        previous = {sig: signal.signal(sig, _handler) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            while not done.wait(1.0):
                pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return received[0]

    def run(self) -> int:
        """Start, serve until SIGTERM/SIGINT, stop cleanly. :returns: the exit status, 0."""
        self.start()
        sd_notify("READY=1")
        LOG.info("%s: running (pid %d)", self.name, os.getpid())
        signum = self.wait_for_signal()
        LOG.info("%s: caught %s, stopping", self.name, signal.Signals(signum).name)
        sd_notify("STOPPING=1")
        faulthandler.dump_traceback_later(self.stop_dump_after, file=sys.stderr)
        self.stop()
        return 0


def _stop_servers(servers: dict[str, Any], timeout: float) -> None:
    """Stop and wait for ``servers`` side by side; give up on stragglers after ``timeout``."""

    def _stop_one(key: str, server: Any) -> None:
        try:
            server.stop()
            server.wait()
        except Exception:
            LOG.exception("Stopping RPC server %s failed", key)

    threads = [
        threading.Thread(target=_stop_one, args=(key, srv), name=f"stop-{key}", daemon=True)
        for key, srv in servers.items()
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            LOG.warning("%s did not finish its in-flight calls within %.0f s; abandoning it",
                        thread.name, timeout)


class ServiceReporter:
    """Keeps one service registered and heartbeating; drive :meth:`run_once` periodically.

    Until ``register`` succeeds it is retried with exponential backoff (1, 2, 4 ... s, capped
    at ``max_backoff``). Then ``heartbeat`` starts every ``interval``, counted from the start
    of the previous one (Nova's ``FixedIntervalLoopingCall``), however long the call took;
    when it raises one of ``unknown`` (the record is gone) the service registers again at
    once. Any other failure is logged and retried on the same beat: a missed heartbeat or two
    is what ``service_down_time`` is there to absorb.

    Why the fixed beat: a heartbeat call that finds no conductor fails only after its timeout
    (a compute's is ``report_interval``), and its message expires with it. Resting a whole
    ``interval`` after that left no heartbeat queued half of the time, so once a restarted
    conductor listened again a compute could go unheard for up to one more ``interval``; on
    the fixed beat a live heartbeat is always queued and the new conductor answers it as soon
    as it consumes. (A conductor restart on the 2-vCPU test machine left the computes unheard
    for 12 s, SIGTERM to serving, against the stack's ``service_down_time`` of 10 s: this
    shortens the gap, it cannot close one that long.)

    :param name: the service, for logs (``fleetcache-compute on host1``).
    :param clock: seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        name: str,
        register: Callable[[], object],
        heartbeat: Callable[[], object],
        interval: float,
        unknown: tuple[type[BaseException], ...] = (),
        max_backoff: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.register = register
        self.heartbeat = heartbeat
        self.interval = interval
        self.unknown = unknown
        self.max_backoff = interval if max_backoff is None else max_backoff
        self.clock = clock
        self.registered = False
        self._attempts = 0
        self._missed = 0

    def run_once(self) -> float:
        """Register or heartbeat once. :returns: seconds until the next run."""
        if not self.registered:
            return self._try_register()
        started = self.clock()
        try:
            self.heartbeat()
        except self.unknown:
            LOG.warning("%s: the conductor does not know this service (any more); "
                        "registering again", self.name)
            self.registered = False
            return self._try_register()
        except Exception as exc:
            self._missed += 1
            delay = self._rest_of_beat(started)
            LOG.warning("%s: heartbeat %d in a row not acknowledged (%s: %s); next try in %.1f s",
                        self.name, self._missed, type(exc).__name__, exc, delay)
            return delay
        if self._missed:
            LOG.info("%s: heartbeat acknowledged again after %d misses", self.name, self._missed)
            self._missed = 0
        return self._rest_of_beat(started)

    def _rest_of_beat(self, started: float) -> float:
        """Seconds from now to one ``interval`` after ``started`` (0 when the call took
        longer)."""
        return max(0.0, self.interval - (self.clock() - started))

    def _try_register(self) -> float:
        try:
            self.register()
        except Exception as exc:
            delay = min(self.max_backoff, 2.0 ** self._attempts)
            self._attempts += 1
            LOG.warning("%s: registration attempt %d failed (%s: %s); is a conductor running? "
                        "Retrying in %.0f s", self.name, self._attempts, type(exc).__name__,
                        exc, delay)
            return delay
        LOG.info("%s: registered after %d attempt(s)", self.name, self._attempts + 1)
        self.registered = True
        self._attempts = 0
        self._missed = 0
        return self.interval
