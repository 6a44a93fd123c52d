"""Tests of the lean notifier (fleetcache.common.leanamqp.notifier) without a broker: its
thread never starts (the real RabbitMQ is in tests/integration/test_lean_notify.py)."""

from __future__ import annotations

import pytest
from oslo_config import cfg

from fleetcache.common.context import RequestContext
from fleetcache.common.leanamqp import broker
from fleetcache.common.leanamqp.notifier import AmqpNotifier


class Unstarted(AmqpNotifier):
    """No thread: what is submitted stays queued for the test to look at or to drive."""

    def _start(self) -> None:
        pass


def test_the_notifier_queues_one_message_per_topic_with_its_queue(conf: cfg.ConfigOpts) -> None:
    notifier = Unstarted(broker.params_for(conf, "rabbit://u:p@h/"), "p", ["a", "b"])
    ctxt = RequestContext(auth_token="s3cret")
    notifier.info(ctxt, "e", {"n": 1})
    notifier.info(ctxt, "e", {"n": 2})
    assert notifier._thread is None  # nothing started, nothing tries to reach host "h"
    assert [(o.routing_key, o.queue) for o in notifier._outbox] == [
        ("a.info", "a.info"), ("b.info", "b.info")] * 2
    assert all(b"s3cret" not in o.body for o in notifier._outbox)
    notifier.close()
    with pytest.raises(RuntimeError, match="closed"):
        notifier.info(ctxt, "e", {})
