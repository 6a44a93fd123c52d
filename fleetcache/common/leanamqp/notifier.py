"""Notifications published on one lean connection, as oslo.messaging's ``messagingv2``
notifier publishes them, without waiting for the broker.

oslo.messaging's notifier publishes each notification from the sending thread and waits for
its publisher confirm: in ``bench/fanout.py --hosts 1000 --concurrency 64`` the conductor's
one ``progress`` notification per host cost it 0.5-0.7 ms of CPU (docs/performance.md,
"Conductor CPU per host (issue 12)"). :class:`AmqpNotifier` queues the message for its
:class:`~.link.Link`'s thread and returns; the thread publishes it to the control exchange
with routing key ``<topic>.<priority>`` after declaring, once per connection, the queue of
that name bound to it, as oslo.messaging's rabbit driver declares it for the same options
(durable as the exchange, quorum with ``rabbit_quorum_queue``:
:func:`~.broker.notification_queue_arguments`), so that a notification with no consumer yet
is kept; and it takes the confirm when it comes.

What differs: sending never blocks and never raises for the broker (oslo.messaging's
``retry`` is not applied): a notification waits in memory until it is confirmed, across
reconnections; one the broker refuses (``basic.nack``) is logged and dropped, and those not
confirmed when the conductor stops are dropped with a warning giving their number
(oslo.messaging's notifier would have blocked the job until the broker answered). While the
broker cannot be reached, at most ``max_waiting`` notifications wait: beyond that the oldest
are dropped, the newest (a job's ``end`` among them) kept, and the count logged as it reaches
1, 10, 100... (a 10,000-host job sends 10,002 notifications, 1.6 KB each in memory as
measured with ``tracemalloc``: without a bound, an outage of the notification broker alone,
the jobs going on, grows the conductor by 16 MB per such job). A queue
the broker holds with other arguments (declared by a service with other options) is used as
it is, with a warning, where oslo.messaging's notifier fails the send; a declaration the
broker refuses otherwise (a permission) keeps the notifications and is tried again after the
growing back-off (:mod:`.retry`).
"""

from __future__ import annotations

import logging
from typing import Any

import amqp

from fleetcache.common.leanamqp import broker, wire
from fleetcache.common.leanamqp.link import Link, Outgoing

LOG = logging.getLogger(__name__)


class AmqpNotifier(Link):
    """``info`` notifications to ``topics`` on one broker (oslo.messaging's ``Notifier``
    interface, as :class:`~fleetcache.conductor.notifications.CacheNotifier` uses it).

    :param publisher_id: e.g. ``fleetcache-conductor:host1``.
    :param topics: ``[oslo_messaging_notifications] topics``.
    :param max_waiting: ``[conductor] max_waiting_notifications`` (None: no bound).
    """

    def __init__(self, params: broker.BrokerParams, publisher_id: str, topics: list[str],
                 max_waiting: int | None = None, name: str = "lean-notify") -> None:
        super().__init__(params, name)
        self.publisher_id = publisher_id
        self.topics = list(topics)
        self.max_waiting = max_waiting
        #: Notifications dropped so far because the broker could not be reached for long.
        self.shed = 0
        self._context: tuple[Any, dict[str, Any]] | None = None
        #: Queues found declared with other arguments, warned about once.
        self._mismatched: set[str] = set()

    def info(self, ctxt: Any, event_type: str, payload: Any) -> None:
        """Queue one notification per topic. :raises RuntimeError: once closed."""
        body = wire.notification_body(self.publisher_id, event_type, "INFO", payload,
                                      self._redacted(ctxt))
        for topic in self.topics:
            routing_key = f"{topic}.info"
            self._submit(Outgoing(body, routing_key, queue=routing_key))

    def _redacted(self, ctxt: Any) -> dict[str, Any]:
        """The context without secrets (``redacted_copy``, as oslo.messaging's notifier
        sends it), kept for the next notification of the same context object: a job sends
        all its notifications with one."""
        cached = self._context
        if cached is not None and cached[0] is ctxt:
            return cached[1]
        values: dict[str, Any] = ctxt.redacted_copy().to_dict() if ctxt is not None else {}
        self._context = (ctxt, values)
        return values

    def _refused(self, item: Outgoing, why: str = "basic.nack") -> None:
        LOG.warning("%s: a notification to %s cannot be sent (%s); dropped",
                    self.name, item.routing_key, why)

    def _shed(self, count: int) -> None:
        """Drop the ``count`` oldest notifications waiting for the broker."""
        for _ in range(count):
            self._to_publish.popleft()
        before, self.shed = self.shed, self.shed + count
        if len(str(before)) != len(str(self.shed)) or not before:
            LOG.warning("%s: %d notification(s) wait for a broker that cannot be reached "
                        "(%s); the oldest are dropped beyond [conductor] "
                        "max_waiting_notifications: %d dropped so far", self.name,
                        len(self._to_publish), self._down_reason, self.shed)

    def _declare(self, queue: str, routing_key: str) -> None:
        """Declare and bind ``queue`` on a channel of its own, so that a refusal, which
        closes the channel, leaves the publishing channel (confirm mode) as it is.

        :raises amqp.exceptions.ChannelError: the broker refused the declaration for another
            reason than the queue's arguments, or the binding (the link then drops the
            connection, this channel with it).
        """
        params = self.params
        conn: Any = self._conn
        channel = conn.channel()
        try:
            channel.queue_declare(queue, durable=params.exchange_durable,
                                  auto_delete=params.exchange_auto_delete,
                                  arguments=dict(params.queue_arguments))
        except amqp.exceptions.PreconditionFailed as exc:
            self._exists_otherwise(queue, exc)
            if not channel.is_open:  # py-amqp reopens a channel the broker closed
                channel = conn.channel()
        channel.queue_bind(queue, params.exchange, routing_key)
        channel.close()

    def _exists_otherwise(self, queue: str, exc: Exception) -> None:
        """The broker holds ``queue`` with other arguments (406): another service declared it
        with other ``[oslo_messaging_rabbit]`` options. Notifications go to it as it is,
        rather than nowhere; the mismatch is logged once per queue."""
        if queue not in self._mismatched:
            self._mismatched.add(queue)
            LOG.warning("%s: the broker holds queue %s with other arguments than this "
                        "service's [oslo_messaging_rabbit] options give (%s); notifications "
                        "go to it as it is", self.name, queue, exc)

    def _abandon(self) -> None:
        """The link stops: say how many notifications the broker never confirmed."""
        left = len(self._to_publish) + len(self._unconfirmed)
        if left:
            why = f" (the broker: {self._down_reason})" if self._down_reason else ""
            earlier = f"; {self.shed} dropped earlier" if self.shed else ""
            LOG.warning("%s: %d notification(s) not confirmed by the broker are dropped at "
                        "stop%s%s", self.name, left, why, earlier)
