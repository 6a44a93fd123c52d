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
* publisher confirms, taken as they come instead of waited for on every publish; a call the
  broker refuses (``basic.nack``) fails with ``MessageDeliveryFailure``;
* reconnection: a lost connection is opened again (the next host of the URL first, then with
  ``rabbit_retry_interval`` growing by ``rabbit_retry_backoff`` up to ``rabbit_interval_max``),
  the reply queue declared and consumed again, and every call whose publish was not confirmed
  published again with the same ``_msg_id`` and ``_unique_id`` (the server drops a duplicate
  it has seen, as after kombu's retried publish). A call whose reply cannot come any more
  (the broker restarted and lost the queue) ends at its call-monitor deadline;
* AMQP heartbeats (``heartbeat_timeout_threshold``, checked ``heartbeat_rate`` times per
  interval) while the connection is open, also when no call runs.

What differs: the connection is opened on the first call and after a loss only when calls
wait for it (oslo.messaging reconnects at once); a call's timers start when it is submitted,
not once it is published; oslo.messaging's tracing and metrics hooks are not called
(:mod:`.broker` refuses a transport that enables them).

Threads: callers build the message, queue it and block on a lock of their own; the
connection's thread does every read and write (py-amqp is not thread-safe), woken by a pipe.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import logging
import os
import select
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

import amqp
import oslo_messaging as messaging

from fleetcache.common.leanamqp import broker, wire

LOG = logging.getLogger(__name__)

#: Seconds one frame may take to arrive once its first byte has, or a write to finish,
#: before the connection is taken for lost.
STALL_TIMEOUT = 10.0

#: What a lost or broken connection raises (py-amqp's errors, socket errors).
CONNECTION_ERRORS = (OSError, amqp.exceptions.AMQPError)


class _Call:
    """One call in flight. Written by the connection's thread, read by its caller once
    ``done`` is released."""

    __slots__ = ("msg_id", "body", "routing_key", "expiration", "monitor", "deadline",
                 "hard_deadline", "done", "value", "failed", "settled")

    def __init__(self, msg_id: str, body: bytes, routing_key: str, timeout: float,
                 monitor: float | None) -> None:
        now = time.monotonic()
        self.msg_id = msg_id
        self.body = body
        self.routing_key = routing_key
        #: oslo.messaging publishes a call with its timeout as the message's TTL.
        self.expiration = str(int(timeout * 1000))
        self.monitor = monitor
        self.hard_deadline = now + timeout
        self.deadline = min(now + monitor, self.hard_deadline) if monitor else self.hard_deadline
        self.done = threading.Lock()
        self.done.acquire()
        self.value: Any = None
        self.failed = False
        self.settled = False


class AmqpCaller:
    """Calls RPC servers on one broker; thread-safe, one connection and one thread.

    :param params: the broker (:func:`.broker.params_for`).
    :param allowed_exmods: modules whose exceptions a reply may re-create.
    :param name: the thread's name, and part of the connection's name on the broker.
    """

    def __init__(self, params: broker.BrokerParams, allowed_exmods: list[str],
                 name: str = "lean-rpc") -> None:
        self.params = params
        self.allowed_exmods = allowed_exmods
        self.name = name
        self.reply_q = f"reply_{uuid.uuid4().hex}"
        # Shared with callers: the outbox (deque appends and pops are atomic) and the flags.
        self._outbox: collections.deque[_Call] = collections.deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._wake_pending = False
        self._stopping = False
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # The connection thread's own state.
        self._calls: dict[str, _Call] = {}
        self._deadlines: list[tuple[float, int, _Call]] = []
        self._seq = itertools.count()
        self._to_publish: collections.deque[_Call] = collections.deque()
        self._unconfirmed: collections.deque[tuple[int, _Call]] = collections.deque()
        self._conn: amqp.Connection | None = None
        self._channel: Any = None
        self._sock_poll: Any = None
        self._poller = select.poll()
        self._poller.register(self._wake_r, select.POLLIN)
        self._sock_fd = -1
        self._published = 0
        self._ack_upto = 0
        self._acked = 0
        self._host = params.first_host()
        self._retry_at = 0.0
        self._retry_delay = params.retry_interval
        self._down_reason: str | None = None
        self._next_tick = 0.0
        #: Connections opened so far (tests and logs).
        self.connects = 0

    # -- callers' side --------------------------------------------------------------------

    def call(self, routing_key: str, method: str, args: Mapping[str, Any], *,
             version: str | None, context: Mapping[str, Any], timeout: float,
             call_monitor_timeout: int | None = None) -> Any:
        """Call ``method`` on the server consuming ``routing_key`` in the control exchange
        and return its result.

        :param timeout: hard limit in seconds (oslo.messaging's ``timeout``).
        :param call_monitor_timeout: the server heartbeats the call every half of it; without
            a heartbeat or the reply for this long, the call times out.
        :raises MessagingTimeout: no reply within the limits (the cause added when known).
        :raises MessageDeliveryFailure: the broker refused the call.
        :raises Exception: the server's exception, as oslo.messaging re-raises it.
        """
        msg_id = uuid.uuid4().hex
        body = wire.call_body(method, args, version, context, msg_id, self.reply_q,
                              call_monitor_timeout)
        call = _Call(msg_id, body, routing_key, timeout, call_monitor_timeout)
        self._submit(call)
        window = float(call_monitor_timeout or timeout)
        # The connection's thread settles every call by its deadline; waiting in windows
        # only guards against that thread having ended (closed, or a bug).
        while not call.done.acquire(timeout=window):
            thread = self._thread
            if thread is None or not thread.is_alive():
                raise wire.timeout_error(msg_id, self.reply_q, "The caller is closed.")
        if call.failed:
            raise call.value
        return call.value

    def _submit(self, call: _Call) -> None:
        if self._stopping:
            raise messaging.MessageDeliveryFailure("the caller is closed")
        if self._thread is None:
            self._start()
        self._outbox.append(call)
        self._wake()

    def _wake(self) -> None:
        if not self._wake_pending:
            self._wake_pending = True
            os.write(self._wake_w, b"\0")

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                thread.start()
                self._thread = thread

    def close(self) -> None:
        """Stop the thread and close the connection. Calls still waiting are not ended here:
        as with oslo.messaging's client on ``transport.cleanup()``, their callers time out
        (a stopping conductor hands its unanswered hosts over, conductor/takeover.py)."""
        self._stopping = True
        thread = self._thread
        if thread is not None:
            self._wake_pending = False
            self._wake()
            thread.join(timeout=STALL_TIMEOUT)
        else:
            self._close_pipe()

    def _close_pipe(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    # -- the connection's thread ------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._take_outbox()
                if self._conn is None and self._calls and time.monotonic() >= self._retry_at:
                    self._connect()
                self._wait(self._next_wakeup())
                self._expire()
                self._tick()
        except Exception:
            LOG.exception("%s: unexpected error; its calls time out", self.name)
        finally:
            self._disconnect()
            self._close_pipe()

    def _take_outbox(self) -> None:
        outbox = self._outbox
        while outbox:
            call = outbox.popleft()
            self._calls[call.msg_id] = call
            heapq.heappush(self._deadlines, (call.deadline, next(self._seq), call))
            self._to_publish.append(call)
        if self._channel is not None and self._to_publish:
            self._publish_waiting()

    def _publish_waiting(self) -> None:
        waiting = self._to_publish
        channel = self._channel
        try:
            while waiting:
                call = waiting[0]
                if not call.settled:
                    channel.basic_publish(
                        amqp.Message(call.body, content_type="application/json",
                                     content_encoding="utf-8", delivery_mode=2,
                                     expiration=call.expiration),
                        exchange=self.params.exchange, routing_key=call.routing_key)
                    self._published += 1
                    self._unconfirmed.append((self._published, call))
                waiting.popleft()
        except CONNECTION_ERRORS as exc:
            self._lost(exc)

    def _next_wakeup(self) -> float | None:
        """Seconds until something is due: a deadline, a heartbeat check, a reconnection."""
        now = time.monotonic()
        due = []
        if self._deadlines:
            due.append(self._deadlines[0][0])
        if self._conn is not None and self.params.heartbeat:
            due.append(self._next_tick)
        elif self._conn is None and self._calls:
            due.append(self._retry_at)
        return max(0.0, min(due) - now) if due else None

    def _wait(self, timeout: float | None) -> None:
        events = self._poller.poll(None if timeout is None else int(timeout * 1000) + 1)
        for fd, _event in events:
            if fd == self._wake_r:
                self._wake_pending = False
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
            elif fd == self._sock_fd and self._conn is not None:
                self._read()

    def _read(self) -> None:
        """Handle every frame that has arrived (each ``blocking_read`` reads one), then
        acknowledge the replies among them at once."""
        conn: Any = self._conn
        try:
            while True:
                conn.blocking_read(None)
                if not self._sock_poll.poll(0) or self._conn is not conn:
                    break
            if self._ack_upto > self._acked and self._channel is not None:
                self._channel.basic_ack(self._ack_upto, multiple=True)
                self._acked = self._ack_upto
        except CONNECTION_ERRORS as exc:
            self._lost(exc)

    def _on_reply(self, message: amqp.Message) -> None:
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

    def _on_confirm(self, delivery_tag: int, multiple: bool) -> None:
        self._confirmed(delivery_tag, multiple, None)

    def _on_refusal(self, delivery_tag: int, multiple: bool) -> None:
        self._confirmed(delivery_tag, multiple,
                        messaging.MessageDeliveryFailure("the broker refused the call "
                                                         "(basic.nack)"))

    def _confirmed(self, tag: int, multiple: bool, error: Exception | None) -> None:
        unconfirmed = self._unconfirmed
        if multiple:
            while unconfirmed and unconfirmed[0][0] <= tag:
                self._refuse(unconfirmed.popleft()[1], error)
            return
        for i, (published, call) in enumerate(unconfirmed):
            if published == tag:
                del unconfirmed[i]
                self._refuse(call, error)
                return

    def _refuse(self, call: _Call, error: Exception | None) -> None:
        if error is not None and not call.settled:
            call.value, call.failed = error, True
            self._settle(call)

    def _settle(self, call: _Call) -> None:
        call.settled = True
        del self._calls[call.msg_id]
        call.done.release()

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

    def _tick(self) -> None:
        if self._conn is None or not self.params.heartbeat:
            return
        now = time.monotonic()
        if now < self._next_tick:
            return
        self._next_tick = now + self.params.heartbeat / self.params.heartbeat_rate
        try:
            self._conn.heartbeat_tick(rate=self.params.heartbeat_rate)
        except CONNECTION_ERRORS as exc:
            self._lost(exc)

    # -- connecting ---------------------------------------------------------------------------

    def _connect(self) -> None:
        """Open the connection: each host of the URL once, from the current one; when none
        answers, try again after the back-off."""
        params = self.params
        error: BaseException | None = None
        for attempt in range(len(params.hosts)):
            index = (self._host + attempt) % len(params.hosts)
            try:
                conn = broker.connect(params, index, f"{self.name}:{self.reply_q}")
            except CONNECTION_ERRORS as exc:
                error = exc
                continue
            try:
                self._set_up(conn)
            except CONNECTION_ERRORS as exc:
                error = exc
                conn.collect()
                continue
            self._host = index
            self._retry_delay = params.retry_interval
            self.connects += 1
            if self._down_reason is not None:
                LOG.info("%s: reconnected to %s:%d", self.name, params.hosts[index].hostname,
                         params.hosts[index].port)
            self._down_reason = None
            self._publish_waiting()
            return
        self._host = (self._host + 1) % len(params.hosts)
        self._down_reason = f"{type(error).__name__}: {error}"
        self._retry_at = time.monotonic() + self._retry_delay
        LOG.warning("%s: cannot connect to the broker (%s); retrying in %.0f s", self.name,
                    self._down_reason, self._retry_delay)
        self._retry_delay = min(self._retry_delay + params.retry_backoff,
                                params.retry_interval_max)

    def _set_up(self, conn: amqp.Connection) -> None:
        params = self.params
        sock = broker.socket_of(conn)
        sock.settimeout(STALL_TIMEOUT)
        channel = conn.channel()
        try:
            channel.exchange_declare(params.exchange, "topic", durable=params.exchange_durable,
                                     auto_delete=params.exchange_auto_delete)
        except amqp.exceptions.PreconditionFailed:
            # It exists with other settings (oslo.messaging then declares it non-durable);
            # calls are published to it as it is.
            channel = conn.channel()
        arguments = ({"x-expires": params.reply_queue_ttl * 1000}
                     if params.reply_queue_ttl else {})
        channel.queue_declare(self.reply_q, durable=False, auto_delete=False,
                              arguments=arguments)
        channel.basic_consume(self.reply_q, callback=self._on_reply, no_ack=False)
        channel.confirm_select()
        channel.events["basic_ack"].add(self._on_confirm)
        channel.events["basic_nack"].add(self._on_refusal)
        self._conn, self._channel = conn, channel
        self._published = self._ack_upto = self._acked = 0
        self._sock_fd = sock.fileno()
        self._poller.register(self._sock_fd, select.POLLIN)
        self._sock_poll = select.poll()
        self._sock_poll.register(self._sock_fd, select.POLLIN)
        self._next_tick = time.monotonic() + (params.heartbeat / params.heartbeat_rate
                                              if params.heartbeat else 0)

    def _lost(self, exc: BaseException) -> None:
        """The connection broke: drop it; calls not confirmed are published again once a
        new one is open (at once, if calls wait)."""
        self._down_reason = f"{type(exc).__name__}: {exc}"
        LOG.warning("%s: broker connection lost (%s); %d calls in flight", self.name,
                    self._down_reason, len(self._calls))
        republish = [call for _tag, call in self._unconfirmed if not call.settled]
        self._unconfirmed.clear()
        self._to_publish.extendleft(reversed(republish))
        self._disconnect()
        self._retry_at = time.monotonic()

    def _disconnect(self) -> None:
        conn, self._conn, self._channel = self._conn, None, None
        if self._sock_fd >= 0:
            try:
                self._poller.unregister(self._sock_fd)
            except KeyError:
                pass
            self._sock_fd = -1
        if conn is not None:
            try:
                if self._stopping:
                    conn.close()
                else:
                    conn.collect()
            except Exception:  # noqa: BLE001 - the connection is being dropped anyway
                conn.collect()
