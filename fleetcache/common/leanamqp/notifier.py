"""Notifications published on one lean connection, as oslo.messaging's ``messagingv2``
notifier publishes them, without waiting for the broker.

oslo.messaging's notifier publishes each notification from the sending thread and waits for
its publisher confirm: in ``bench/fanout.py --hosts 1000 --concurrency 64`` the conductor's
one ``progress`` notification per host cost it 0.5-0.7 ms of CPU (docs/performance.md,
"Conductor CPU per host (issue 12)"). :class:`AmqpNotifier` queues the message for its
:class:`~.link.Link`'s thread and returns; the thread publishes it to the control exchange
with routing key ``<topic>.<priority>`` after declaring, once per connection, the queue of
that name bound to it (durable as the exchange, as oslo.messaging's rabbit driver does, so a
notification with no consumer yet is kept), and takes its confirm when it comes.

What differs: sending never blocks and never raises for the broker (oslo.messaging's
``retry`` is not applied): a notification waits in memory until it is confirmed, across
reconnections; one the broker refuses (``basic.nack``) is logged and dropped, and those not
confirmed when the conductor stops are lost (oslo.messaging's notifier would have blocked
the job until the broker answered).
"""

from __future__ import annotations

import logging
from typing import Any

from fleetcache.common.leanamqp import broker, wire
from fleetcache.common.leanamqp.link import Link, Outgoing

LOG = logging.getLogger(__name__)


class AmqpNotifier(Link):
    """``info`` notifications to ``topics`` on one broker (oslo.messaging's ``Notifier``
    interface, as :class:`~fleetcache.conductor.notifications.CacheNotifier` uses it).

    :param publisher_id: e.g. ``fleetcache-conductor:host1``.
    :param topics: ``[oslo_messaging_notifications] topics``.
    """

    def __init__(self, params: broker.BrokerParams, publisher_id: str, topics: list[str],
                 name: str = "lean-notify") -> None:
        super().__init__(params, name)
        self.publisher_id = publisher_id
        self.topics = list(topics)
        self._context: tuple[Any, dict[str, Any]] | None = None

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
