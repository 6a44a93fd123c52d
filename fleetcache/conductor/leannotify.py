"""The conductor's notifier: :class:`~fleetcache.common.leanamqp.notifier.AmqpNotifier` when
its notifications go to plain ``rabbit://`` with the ``messagingv2`` driver, oslo.messaging's
``Notifier`` otherwise.

Selected with the compute calls' switch, ``[conductor] lean_compute_calls``: the job's one
``progress`` notification per host is the other half of its per-host messaging cost.
"""

from __future__ import annotations

import logging
from typing import Any

from oslo_config import cfg

from fleetcache.common import rpc
from fleetcache.common.leanamqp import broker
from fleetcache.common.leanamqp.notifier import AmqpNotifier

LOG = logging.getLogger(__name__)

#: The driver names oslo.messaging gives its 2.0-envelope notification driver.
MESSAGING_V2 = {"messagingv2", "messaging-v2"}

#: Seconds a stopping conductor waits for its queued notifications to be confirmed.
FLUSH_SECONDS = 5.0


def build_notifier(conf: cfg.ConfigOpts, transports: rpc.Transports,
                   publisher_id: str) -> tuple[Any, AmqpNotifier | None]:
    """:returns: the notifier to send with, and the lean one to close at stop (or None)."""
    transport = transports.notification()  # also registers [oslo_messaging_notifications]
    oslo_notifier = rpc.get_notifier(transport, publisher_id=publisher_id)
    notifications = conf.oslo_messaging_notifications
    drivers = list(notifications.driver)
    if not conf.conductor.lean_compute_calls or len(drivers) != 1 \
            or drivers[0] not in MESSAGING_V2:
        return oslo_notifier, None
    try:
        params = broker.params_for(conf, notifications.transport_url or conf.transport_url)
    except broker.Unsupported as exc:
        LOG.info("Notifications go through oslo.messaging's notifier: %s", exc)
        return oslo_notifier, None
    lean = AmqpNotifier(params, publisher_id, list(notifications.topics),
                        max_waiting=conf.conductor.max_waiting_notifications)
    LOG.info("Notifications go through one connection (%s)", lean.name)
    return lean, lean
