"""RPC calls over one broker connection, owned by one thread, many calls in flight.

:class:`AmqpCaller` keeps what oslo.messaging's ``call`` gives its caller, with its own
machinery:

* the wire format of :mod:`.wire`, so unmodified oslo.messaging RPC servers answer;
* one reply queue per caller, named ``reply_<uuid>`` and declared as oslo.messaging declares
  its own (not exclusive, not auto-deleted, ``x-expires`` = ``rabbit_transient_queues_ttl``),
  so that a reply sent while the connection is down waits in it; replies are acknowledged
  (once per batch read), so one read but not yet handled when the connection drops is
  delivered again;
* the call monitor: each call has a deadline ``call_monitor_timeout`` ahead, pushed back by
  every heartbeat reply (``ending`` false), and a hard limit ``timeout``; either ends it with
  ``MessagingTimeout``. A remote exception is re-raised as oslo.messaging re-raises it;
* publisher confirms, reconnection and AMQP heartbeats of :class:`~.link.Link`: a call the
  broker refuses fails with ``MessageDeliveryFailure``; after a reconnection the reply queue
  is declared and consumed again and every call not confirmed is published again, with the
  same ``_msg_id`` and ``_unique_id``. A call whose reply cannot come any more (the broker
  restarted and lost the queue) ends at its call-monitor deadline.

What differs: the connection is opened on the first call and after a loss only when calls
wait for it (oslo.messaging reconnects at once); a call's timers start when it is submitted,
not once it is published; oslo.messaging's tracing and metrics hooks are not called
(:mod:`.broker` refuses a transport that enables them).

Callers build the message and queue it; the link's thread publishes it, matches the reply by
``_msg_id`` and either releases the lock the caller blocks on (:meth:`AmqpCaller.call`) or
hands the outcome to the caller's function (:meth:`AmqpCaller.call_async`).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import oslo_messaging as messaging

from fleetcache.common.leanamqp import broker, wire
from fleetcache.common.leanamqp.link import Link, Outgoing

LOG = logging.getLogger(__name__)


#: Called on the link's thread when a call ends: ``(value, failed)``, ``value`` being the
#: result, or the exception when ``failed``.
OnDone = Callable[[Any, bool], None]


class _Call(Outgoing):
    """One call in flight. Written by the link's thread; read by its caller once ``done`` is
    released, or handed to ``on_done``."""

    __slots__ = ("msg_id", "monitor", "deadline", "hard_deadline", "done", "on_done", "value",
                 "failed")

    def __init__(self, msg_id: str, body: bytes, routing_key: str, timeout: float,
                 monitor: float | None, on_done: OnDone | None = None) -> None:
        # oslo.messaging publishes a call with its timeout as the message's TTL.
        super().__init__(body, routing_key, expiration=str(int(timeout * 1000)))
        now = time.monotonic()
        self.msg_id = msg_id
        self.monitor = monitor
        self.hard_deadline = now + timeout
        self.deadline = min(now + monitor, self.hard_deadline) if monitor else self.hard_deadline
        self.on_done = on_done
        self.done: threading.Lock | None = None
        if on_done is None:
            self.done = threading.Lock()
            self.done.acquire()
        self.value: Any = None
        self.failed = False


class AmqpCaller(Link):
    """Calls RPC servers on one broker; thread-safe.

    :param params: the broker (:func:`.broker.params_for`).
    :param allowed_exmods: modules whose exceptions a reply may re-create.
    :param name: the thread's name, and part of the connection's name on the broker.
    """

    def __init__(self, params: broker.BrokerParams, allowed_exmods: list[str],
                 name: str = "lean-rpc") -> None:
        self.reply_q = f"reply_{uuid.uuid4().hex}"
        super().__init__(params, f"{name}:{self.reply_q}")
        self.allowed_exmods = allowed_exmods
        self._calls: dict[str, _Call] = {}
        self._deadlines: list[tuple[float, int, _Call]] = []
        self._seq = itertools.count()
        self._ack_upto = 0
        self._acked = 0

    def call(self, routing_key: str, method: str, args: Mapping[str, Any], *,
             version: str | None, context: Mapping[str, Any], timeout: float,
             call_monitor_timeout: int | None = None) -> Any:
        """Call ``method`` on the server consuming ``routing_key`` in the control exchange
        and return its result.

        :param timeout: hard limit in seconds (oslo.messaging's ``timeout``).
        :param call_monitor_timeout: the server heartbeats the call every half of it; without
            a heartbeat or the reply for this long, the call times out.
        :raises MessagingTimeout: no reply within the limits (the cause added when known).
        :raises MessageDeliveryFailure: the broker refused the call, or the caller is closed.
        :raises Exception: the server's exception, as oslo.messaging re-raises it.
        """
        call = self._send(routing_key, method, args, version, context, timeout,
                          call_monitor_timeout, None)
        done = call.done
        assert done is not None
        window = float(call_monitor_timeout or timeout)
        # The link's thread settles every call by its deadline, and every call left when it
        # stops; waiting in windows only guards against that thread having died all the same.
        while not done.acquire(timeout=window):
            if not self.running:
                raise wire.timeout_error(call.msg_id, self.reply_q, "The caller is closed.")
        if call.failed:
            raise call.value
        return call.value

    def call_async(self, routing_key: str, method: str, args: Mapping[str, Any], *,
                   version: str | None, context: Mapping[str, Any], timeout: float,
                   call_monitor_timeout: int | None = None, on_done: OnDone) -> None:
        """As :meth:`call`, without waiting: ``on_done(value, failed)`` gets the outcome.

        ``on_done`` runs on the link's thread, where the replies of every call are read: it
        must be quick, never block, and not call this caller back synchronously. What it
        raises is logged. Every call gets its ``on_done`` exactly once: at its reply, its
        timeout, or when the caller stops (``MessagingTimeout``, "The caller is closed.").

        NOTE: a thread blocked per call and woken by the link's thread cost the conductor
        about 20 % of its GIL samples in ``bench/fanout.py --hosts 1000 --concurrency 64``
        (the wake-up in ``_settle`` alone 11.6 %; docs/performance.md, "Publishing without
        py-amqp's message, and calls without a thread each (issue 12, 2026-11-26)").

        :raises MessageDeliveryFailure: at once, when the caller is closed.
        """
        self._send(routing_key, method, args, version, context, timeout, call_monitor_timeout,
                   on_done)

    def _send(self, routing_key: str, method: str, args: Mapping[str, Any],
              version: str | None, context: Mapping[str, Any], timeout: float,
              call_monitor_timeout: int | None, on_done: OnDone | None) -> _Call:
        msg_id = uuid.uuid4().hex
        body = wire.call_body(method, args, version, context, msg_id, self.reply_q,
                              call_monitor_timeout)
        call = _Call(msg_id, body, routing_key, timeout, call_monitor_timeout, on_done)
        try:
            self._submit(call)
        except RuntimeError as exc:
            raise messaging.MessageDeliveryFailure(str(exc)) from exc
        return call

    # -- the link's hooks ---------------------------------------------------------------------

    def _accept(self, item: Outgoing) -> None:
        assert isinstance(item, _Call)
        self._calls[item.msg_id] = item
        heapq.heappush(self._deadlines, (item.deadline, next(self._seq), item))

    def _busy(self) -> bool:
        return bool(self._calls)

    def _due(self) -> float | None:
        return self._deadlines[0][0] if self._deadlines else None

    def _set_up_channel(self, channel: Any) -> None:
        arguments = ({"x-expires": self.params.reply_queue_ttl * 1000}
                     if self.params.reply_queue_ttl else {})
        channel.queue_declare(self.reply_q, durable=False, auto_delete=False,
                              arguments=arguments)
        channel.basic_consume(self.reply_q, callback=self._on_reply, no_ack=False)
        self._ack_upto = self._acked = 0

    def _after_read(self) -> None:
        """Acknowledge the replies read, at once."""
        if self._ack_upto > self._acked and self._channel is not None:
            self._channel.basic_ack(self._ack_upto, multiple=True)
            self._acked = self._ack_upto

    def _refused(self, item: Outgoing, why: str = "basic.nack") -> None:
        assert isinstance(item, _Call)
        if not item.settled:
            item.value = messaging.MessageDeliveryFailure(f"the call cannot be sent ({why})")
            item.failed = True
            self._settle(item)

    def _on_reply(self, message: Any) -> None:
        self._ack_upto = message.delivery_info["delivery_tag"]
        try:
            reply = wire.parse_reply(message.body)
        except ValueError as exc:
            LOG.warning("%s: dropped a reply that is not oslo.messaging's: %s", self.name, exc)
            return
        call = self._calls.get(reply.msg_id or "")
        if call is None:
            return  # a reply to a call that has ended (timed out, or answered twice)
        if reply.failure:
            call.value = wire.remote_error(reply.failure, self.allowed_exmods)
            call.failed = True
        elif reply.result is not None:
            call.value = reply.result
        elif not reply.ending and call.monitor:
            call.deadline = min(time.monotonic() + call.monitor, call.hard_deadline)
        if reply.ending:
            self._settle(call)

    def _settle(self, call: _Call) -> None:
        call.settled = True
        call.body = b""  # never published again; the heap may hold the call a while
        del self._calls[call.msg_id]
        if call.on_done is None:
            assert call.done is not None
            call.done.release()
            return
        try:
            call.on_done(call.value, call.failed)
        except Exception:
            LOG.exception("%s: the handler of call %s failed", self.name, call.msg_id)

    def _abandon(self) -> None:
        """The link stops: every call still waiting ends now, as closed."""
        for call in list(self._calls.values()):
            call.value = wire.timeout_error(call.msg_id, self.reply_q, "The caller is closed.")
            call.failed = True
            self._settle(call)

    def _expire(self) -> None:
        now = time.monotonic()
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            _when, _seq, call = heapq.heappop(deadlines)
            if call.settled:
                continue
            if call.deadline > now:  # a heartbeat pushed it back
                heapq.heappush(deadlines, (call.deadline, next(self._seq), call))
                continue
            why = (f"The broker connection is down: {self._down_reason}."
                   if self._conn is None and self._down_reason else None)
            call.value, call.failed = wire.timeout_error(call.msg_id, self.reply_q, why), True
            self._settle(call)
        if not self._calls:
            deadlines.clear()
        elif len(deadlines) > 2 * len(self._calls) + 64:
            # Ended calls stay in the heap until their deadline (a minute, by default): at a
            # few hundred calls a second, drop them now so memory follows the calls in flight.
            self._deadlines = [(c.deadline, next(self._seq), c) for c in self._calls.values()]
            heapq.heapify(self._deadlines)
