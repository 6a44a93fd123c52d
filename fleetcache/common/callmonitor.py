"""Call-monitor heartbeats of an RPC server's calls in progress, from one thread per monitor.

A caller that sets ``call_monitor_timeout`` (the conductor does, on every ``cache_images``) asks
the server to send a heartbeat every ``call_monitor_timeout / 2`` seconds while the call runs,
so that a live server is never timed out and a dead one is noticed soon. oslo.messaging (18.x,
``rpc/dispatcher.py`` ``RPCDispatcher.dispatch``) does that by starting a watchdog thread for
every such call and joining it when the call returns, even when the call ends long before its
first heartbeat is due, as nearly every ``cache_images`` of an image already cached does.

:class:`MonitoredDispatcher` keeps oslo.messaging's dispatching and replaces only that thread:
it hands the call to a :class:`CallMonitor` (a heap of due times, served by one thread that
sleeps until the earliest heartbeat is due) and hides the timeout from the base class, so no
watchdog thread is started. Registering and forgetting a call are a heap push and a flag under
one lock. The heartbeats and their interval are unchanged. One difference: the heartbeats of
all calls leave from one thread, so a heartbeat that blocks (the broker is gone) delays the
others; the callers' own timeouts then fire as they would with oslo.messaging's threads.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Any

import oslo_messaging as messaging
from oslo_messaging.rpc import dispatcher as rpc_dispatcher

LOG = logging.getLogger(__name__)


class _Call:
    """One call in progress: what to heartbeat, how often, and whether it still runs."""

    __slots__ = ("incoming", "interval", "active")

    def __init__(self, incoming: Any, interval: float) -> None:
        self.incoming = incoming
        self.interval = interval
        self.active = True


class CallMonitor:
    """Sends the heartbeats of every call it watches, from one daemon thread started on first use.

    Build one per process (or per RPC server) at start-up and pass it to
    :func:`fleetcache.common.rpc.get_server`.
    """

    def __init__(self, name: str = "call-monitor") -> None:
        self.name = name
        self._heap: list[tuple[float, int, _Call]] = []
        self._live = 0
        self._seq = itertools.count()
        self._cond = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._stopped = False

    def watch(self, incoming: Any, client_timeout: Any) -> _Call | None:
        """Heartbeat ``incoming`` every ``client_timeout / 2`` seconds until :meth:`forget`.

        :returns: the handle for :meth:`forget`, or ``None`` for a timeout oslo.messaging would
            refuse too (not an integer, or under 2 seconds), which is logged as it logs it.
        """
        try:
            interval = int(client_timeout) / 2
        except (TypeError, ValueError):
            interval = 0
        if interval < 1:
            LOG.warning("Client provided an invalid timeout value of %r", client_timeout)
            return None
        call = _Call(incoming, interval)
        due = time.monotonic() + interval
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            earliest = self._heap[0][0] if self._heap else None
            heapq.heappush(self._heap, (due, next(self._seq), call))
            self._live += 1
            if earliest is None or due < earliest:
                self._cond.notify()
        return call

    def forget(self, call: _Call | None) -> None:
        """Stop heartbeating a call (it has returned)."""
        if call is None:
            return
        with self._cond:
            if call.active:
                call.active = False
                self._live -= 1
                if self._live == 0:  # every entry is dead: drop them at once
                    self._heap.clear()

    @property
    def watched(self) -> int:
        """Calls being heartbeated now."""
        return self._live

    def stop(self) -> None:
        """End the thread (tests); later calls are no longer heartbeated."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()

    def _due(self) -> list[_Call]:
        """Wait for the next heartbeats due; reschedule them. Caller holds the lock."""
        while not self._stopped:
            now = time.monotonic()
            if self._heap and self._heap[0][0] <= now:
                due = []
                while self._heap and self._heap[0][0] <= now:
                    _when, _seq, call = heapq.heappop(self._heap)
                    if call.active:
                        due.append(call)
                        heapq.heappush(self._heap, (now + call.interval, next(self._seq), call))
                return due
            self._cond.wait(self._heap[0][0] - now if self._heap else None)
        return []

    def _run(self) -> None:
        while True:
            with self._cond:
                due = self._due()
                if self._stopped:
                    return
            for call in due:
                if not call.active:
                    continue
                LOG.debug("Sending call-monitor heartbeat for active call to %s (interval=%i)",
                          call.incoming.message.get("method"), call.interval)
                try:
                    call.incoming.heartbeat()
                except Exception as exc:
                    # As oslo.messaging's watchdog: the broker or the caller is gone; the
                    # caller times out as it would anyway.
                    LOG.debug("Call-monitor heartbeat failed: %s", exc)
                    self.forget(call)


class MonitoredDispatcher(rpc_dispatcher.RPCDispatcher):  # type: ignore[misc]
    """oslo.messaging's RPC dispatcher with the heartbeats sent by a :class:`CallMonitor`.

    NOTE: measured with ``bench/fanout.py`` (docs/performance.md, "The compute's watchdog
    thread per call"): a thread started and joined per call costs the compute more than the
    call itself when a process serves many calls at once.
    """

    def __init__(self, endpoints: list[Any], serializer: messaging.Serializer | None,
                 access_policy: type | None, monitor: CallMonitor) -> None:
        super().__init__(endpoints, serializer, access_policy)
        self.monitor = monitor

    def dispatch(self, incoming: Any) -> Any:
        client_timeout = incoming.client_timeout
        if not client_timeout:
            return super().dispatch(incoming)
        call = self.monitor.watch(incoming, client_timeout)
        incoming.client_timeout = None  # the base class starts no watchdog thread then
        try:
            return super().dispatch(incoming)
        finally:
            incoming.client_timeout = client_timeout
            self.monitor.forget(call)
