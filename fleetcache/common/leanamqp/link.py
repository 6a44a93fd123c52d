"""One broker connection owned by one thread: publishing with confirms taken as they come,
reading, AMQP heartbeats, reconnection.

The base of :class:`~.caller.AmqpCaller` (calls and their replies) and
:class:`~.notifier.AmqpNotifier` (notifications). Other threads only queue messages
(:meth:`Link._submit`) and wake the thread through a pipe; the thread does every read and
write, since py-amqp's connection is not thread-safe.

* Publisher confirms are taken as they come: a message counts as sent once the broker acks
  it; one it refuses (``basic.nack``) goes to :meth:`Link._refused`.
* A lost connection is opened again, as oslo.messaging would (:mod:`.retry`); every message
  not confirmed yet is published again on the new connection (a duplicate call is dropped by
  the server by its ``_unique_id``, as after kombu's retried publish). A link reconnects
  only while it has messages to send or replies to wait for.
* A method the broker refuses on the channel (403, 404, 406) drops the connection too, every
  message kept, but the next attempt waits the growing back-off (:mod:`.retry`).
* AMQP heartbeats (``heartbeat_timeout_threshold``) are checked ``heartbeat_rate`` times per
  interval while the connection is open, also when nothing is sent.
"""

from __future__ import annotations

import collections
import logging
import os
import select
import threading
import time
from typing import Any

import amqp

from fleetcache.common.leanamqp import broker, frames, retry

LOG = logging.getLogger(__name__)

#: Seconds one frame may take to arrive once its first byte has, or a write to finish,
#: before the connection is taken for lost.
STALL_TIMEOUT = 10.0

#: Frames handled in one go before queued messages are published.
READ_BATCH = 256

#: What a lost or broken connection raises (py-amqp's errors, socket errors).
CONNECTION_ERRORS = (OSError, amqp.exceptions.AMQPError)

#: What the broker's ``channel.close`` raises (403, 404, 405, 406...): one method refused, the
#: connection still open. Caught before :data:`CONNECTION_ERRORS`, which it is part of.
CHANNEL_REFUSALS = (amqp.exceptions.ChannelError,)


class Outgoing:
    """One message to publish to the control exchange.

    :ivar queue: a queue to declare and bind with the routing key before the first publish
        on each connection (a notification's, so that it is kept until a consumer comes).
    """

    __slots__ = ("body", "routing_key", "expiration", "queue", "settled")

    def __init__(self, body: bytes, routing_key: str, expiration: str | None = None,
                 queue: str | None = None) -> None:
        self.body = body
        self.routing_key = routing_key
        self.expiration = expiration
        self.queue = queue
        self.settled = False


class Link:
    """A connection to one broker and the thread that owns it.

    :param name: the thread's name, and part of the connection's name on the broker.
    """

    #: Messages kept for a broker that cannot be reached (queued, or published and not
    #: confirmed when the connection broke) beyond which :meth:`_shed` drops some (not before
    #: a first attempt to connect failed); None: no bound (calls end at their timeout anyway).
    max_waiting: int | None = None

    def __init__(self, params: broker.BrokerParams, name: str) -> None:
        self.params = params
        self.name = name
        # Shared with other threads: the outbox (deque appends and pops are atomic), flags.
        self._outbox: collections.deque[Outgoing] = collections.deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._wake_pending = False
        self._stopping = False
        self._ended = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # The thread's own state.
        self._to_publish: collections.deque[Outgoing] = collections.deque()
        self._unconfirmed: collections.deque[tuple[int, Outgoing]] = collections.deque()
        self._declared: set[str] = set()
        self._conn: amqp.Connection | None = None
        self._channel: Any = None
        self._sock_poll: Any = None
        self._recv: broker.BufferedRecv | None = None
        self._poller = select.poll()
        self._poller.register(self._wake_r, select.POLLIN)
        self._sock_fd = -1
        self._published = 0
        self._retry = retry.Reconnect(params)
        self._down_reason: str | None = None
        self._next_tick = 0.0
        #: Connections opened so far, set up or not (tests and logs).
        self.connects = 0

    # -- other threads ----------------------------------------------------------------------

    def _submit(self, item: Outgoing) -> None:
        """Queue ``item`` for the thread. :raises RuntimeError: once closed."""
        # Under the lock, the thread cannot end between the check and the append: what it
        # finds queued when it ends is abandoned (``_abandon``), never silently kept.
        with self._lock:
            if self._stopping or self._ended:
                raise RuntimeError(f"{self.name} is closed")
            if self._thread is None:
                self._start()
            self._outbox.append(item)
            if not self._wake_pending:
                self._wake()

    def _start(self) -> None:
        """Start the thread (first submission, under ``_lock``); a seam for tests of what is
        queued, which replace it so that no thread tries to reach a broker."""
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _wake(self) -> None:
        """Wake the thread; called under ``_lock`` while it runs (the pipe is open)."""
        self._wake_pending = True
        os.write(self._wake_w, b"\0")

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self, flush: float = 0.0) -> None:
        """Stop the thread and close the connection.

        :param flush: seconds to wait first for what is queued to be published and
            confirmed; whatever is left then is dropped.
        """
        thread = self._thread
        deadline = time.monotonic() + flush
        while (thread is not None and thread.is_alive() and time.monotonic() < deadline
               and (self._outbox or self._to_publish or self._unconfirmed)):
            time.sleep(0.05)
        with self._lock:
            self._stopping = True
            thread = self._thread
            if thread is None:
                self._ended = True
                self._close_pipe()
                return
            if not self._ended:
                self._wake()
        thread.join(timeout=STALL_TIMEOUT)

    def _close_pipe(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    # -- hooks --------------------------------------------------------------------------------

    def _accept(self, item: Outgoing) -> None:
        """A submitted item reaches the thread (before it is published)."""

    def _busy(self) -> bool:
        """Whether the link needs a connection now (things to send or to wait for)."""
        return bool(self._to_publish or self._unconfirmed)

    def _due(self) -> float | None:
        """Monotonic time of the next deadline of the subclass, if any."""
        return None

    def _expire(self) -> None:
        """Handle the deadlines that have passed."""

    def _set_up_channel(self, channel: Any) -> None:
        """Declare and consume what the subclass needs on a new channel."""

    def _after_read(self) -> None:
        """Every frame that had arrived was handled."""

    def _abandon(self) -> None:
        """The thread stops: end whatever still waits for an answer."""

    def _refused(self, item: Outgoing, why: str = "basic.nack") -> None:
        """``item`` cannot be sent: the broker refused it (``basic.nack``), or ``why``."""

    def _shed(self, count: int) -> None:
        """Without a connection, :attr:`max_waiting` messages are waiting and ``count`` more:
        drop what the subclass can do without (links with a bound implement it)."""
        raise NotImplementedError(count)

    def _declare(self, queue: str, routing_key: str) -> None:
        """Declare an item's :attr:`Outgoing.queue`, bound to ``routing_key``, before its first
        publish on each connection (links whose items name one implement it)."""
        raise NotImplementedError(queue)

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._take_outbox()
                if self._conn is None and self._busy() and time.monotonic() >= self._retry.at:
                    self._connect()
                self._wait(self._next_wakeup())
                self._expire()
                self._tick()
        except Exception:
            LOG.exception("%s: unexpected error; the link stops", self.name)
        finally:
            with self._lock:
                self._ended = True
                self._close_pipe()
            self._disconnect()
            self._take_outbox()  # disconnected: only handed to _to_publish, for _abandon
            self._abandon()

    def _take_outbox(self) -> None:
        outbox = self._outbox
        while outbox:
            item = outbox.popleft()
            self._accept(item)
            self._to_publish.append(item)
        if self._channel is not None:
            if self._to_publish:
                self._publish_waiting()
        elif (self.max_waiting is not None and self._down_reason is not None
              and len(self._to_publish) > self.max_waiting):
            self._shed(len(self._to_publish) - self.max_waiting)

    def _publish_waiting(self) -> None:
        """Publish what waits, in one write for the whole batch (:mod:`.frames`).

        NOTE: each system call drops the GIL, and taking it back can wait out the switch
        interval (5 ms) behind a busy thread (the job's result writer); one ``sendall`` per
        call let the calls of a batch go out milliseconds apart.
        """
        waiting = self._to_publish
        conn: Any = self._conn
        channel_id = self._channel.channel_id
        exchange = self.params.exchange
        batch: list[bytes] = []
        try:
            while waiting:
                item = waiting[0]
                if not item.settled:
                    if item.queue is not None and item.queue not in self._declared:
                        self._flush(conn, batch)  # a declaration waits for its answer
                        self._declare(item.queue, item.routing_key)
                        self._declared.add(item.queue)
                    try:
                        data = frames.publish(channel_id, conn.frame_max, exchange,
                                              item.routing_key, item.body, item.expiration)
                    except ValueError as exc:  # a routing key over 255 bytes
                        LOG.warning("%s: cannot publish to %r: %s", self.name,
                                    item.routing_key, exc)
                        self._refused(item, str(exc))
                    else:
                        batch.append(data)
                        self._published += 1
                        self._unconfirmed.append((self._published, item))
                waiting.popleft()
            self._flush(conn, batch)
        except CHANNEL_REFUSALS as exc:
            self._channel_refused(exc)
        except CONNECTION_ERRORS as exc:
            self._lost(exc)

    @staticmethod
    def _flush(conn: Any, batch: list[bytes]) -> None:
        if batch:
            data = b"".join(batch)
            batch.clear()
            conn.transport.write(data)

    def _next_wakeup(self) -> float | None:
        """Seconds until something is due: a deadline, a heartbeat check, a reconnection."""
        due = [t for t in (self._due(),) if t is not None]
        if self._conn is not None and self.params.heartbeat:
            due.append(self._next_tick)
        elif self._conn is None and self._busy():
            due.append(self._retry.at)
        return max(0.0, min(due) - time.monotonic()) if due else None

    def _wait(self, timeout: float | None) -> None:
        buffered = self._conn is not None and self._recv is not None and self._recv.pending
        if buffered:
            timeout = 0.0
        events = self._poller.poll(None if timeout is None else int(timeout * 1000) + 1)
        readable = buffered
        for fd, _event in events:
            if fd == self._wake_r:
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
                # Only now: cleared before the pipe is drained, a wake-up written in between
                # is drained with the flag left set, and the next submitter writes none (the
                # next call then waits for the heartbeat check, up to 20 s).
                self._wake_pending = False
            elif fd == self._sock_fd:
                readable = True
        if readable and self._conn is not None:
            self._read()

    def _read(self) -> None:
        """Handle the frames that have arrived (``blocking_read`` reads one), until none is
        left, at most :data:`READ_BATCH`, or as soon as another thread queued a message: under
        a steady stream of replies the socket is never empty, and new calls would wait behind
        it (the pipeline drains, then refills in bursts)."""
        conn: Any = self._conn
        outbox = self._outbox
        try:
            recv = self._recv
            assert recv is not None
            for _ in range(READ_BATCH):
                conn.blocking_read(None)
                if outbox or self._conn is not conn or not (
                        recv.pending or self._sock_poll.poll(0)):
                    break
            self._after_read()
        except CHANNEL_REFUSALS as exc:  # a publish refused (a permission, no exchange)
            self._channel_refused(exc)
        except CONNECTION_ERRORS as exc:
            self._lost(exc)

    def _on_confirm(self, delivery_tag: int, multiple: bool) -> None:
        self._confirmed(delivery_tag, multiple, refused=False)

    def _on_refusal(self, delivery_tag: int, multiple: bool) -> None:
        self._confirmed(delivery_tag, multiple, refused=True)

    def _confirmed(self, tag: int, multiple: bool, refused: bool) -> None:
        if not refused and self._retry.accepted():
            LOG.info("%s: the broker accepts messages again", self.name)
        unconfirmed = self._unconfirmed
        if multiple:
            while unconfirmed and unconfirmed[0][0] <= tag:
                item = unconfirmed.popleft()[1]
                if refused:
                    self._refused(item)
            return
        for i, (published, item) in enumerate(unconfirmed):
            if published == tag:
                del unconfirmed[i]
                if refused:
                    self._refused(item)
                return

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
        for index in self._retry.hosts():
            try:
                conn = broker.connect(params, index, self.name)
            except CONNECTION_ERRORS as exc:
                error = exc
                continue
            # Counted before the set-up: its synchronous methods read frames, and a reply
            # that waited in the reply queue can be handed to its caller during them.
            self.connects += 1
            try:
                self._set_up(conn)
            except CONNECTION_ERRORS as exc:
                error = exc
                self._disconnect()
                continue
            self._retry.connected(index)
            if self._down_reason is not None and self._retry.refusal is None:
                LOG.info("%s: reconnected to %s:%d", self.name, params.hosts[index].hostname,
                         params.hosts[index].port)
            self._down_reason = None
            self._publish_waiting()
            return
        self._down_reason = f"{type(error).__name__}: {error}"
        LOG.warning("%s: cannot connect to the broker (%s); retrying in %.0f s", self.name,
                    self._down_reason, self._retry.failed())

    def _set_up(self, conn: amqp.Connection) -> None:
        params = self.params
        sock = broker.socket_of(conn)
        sock.settimeout(STALL_TIMEOUT)
        self._recv = broker.BufferedRecv(sock)
        conn.transport._quick_recv = self._recv
        self._conn = conn
        self._sock_fd = sock.fileno()
        self._poller.register(self._sock_fd, select.POLLIN)
        channel = conn.channel()
        try:
            channel.exchange_declare(params.exchange, "topic", durable=params.exchange_durable,
                                     auto_delete=params.exchange_auto_delete)
        except amqp.exceptions.PreconditionFailed:
            # It exists with other settings (oslo.messaging then declares it non-durable);
            # messages are published to it as it is.
            channel = conn.channel()
        self._declared.clear()
        self._set_up_channel(channel)
        channel.confirm_select()
        channel.events["basic_ack"].add(self._on_confirm)
        channel.events["basic_nack"].add(self._on_refusal)
        self._channel = channel
        self._published = 0
        self._sock_poll = select.poll()
        self._sock_poll.register(self._sock_fd, select.POLLIN)
        self._next_tick = time.monotonic() + (params.heartbeat / params.heartbeat_rate
                                              if params.heartbeat else 0)

    def _lost(self, exc: BaseException) -> None:
        """The connection broke: drop it; what was not confirmed is published again once a
        new one is open (at once, if the link is busy)."""
        self._down_reason = f"{type(exc).__name__}: {exc}"
        LOG.warning("%s: broker connection lost (%s)", self.name, self._down_reason)
        self._drop()
        self._retry.lost()

    def _channel_refused(self, exc: BaseException) -> None:
        """The broker refused a declaration or a publish: drop the connection as if lost,
        but try again only after the back-off, logging the broker's reason each time."""
        reason = f"{type(exc).__name__}: {exc}"
        self._down_reason = reason
        self._drop()
        LOG.warning("%s: the broker refused %s; %d message(s) kept, trying again in %.0f s",
                    self.name, reason, len(self._to_publish), self._retry.refused(reason))

    def _drop(self) -> None:
        """Disconnect; what was not confirmed goes first to be published again."""
        again = [item for _tag, item in self._unconfirmed if not item.settled]
        self._unconfirmed.clear()
        self._to_publish.extendleft(reversed(again))
        self._disconnect()

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
