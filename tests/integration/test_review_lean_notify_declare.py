"""Review findings in the conductor's lean notifier (fleetcache.common.leanamqp.notifier /
link) on the real RabbitMQ: a ``notifications.info`` queue the broker will not let it declare
as it does (declared by oslo.messaging with ``[oslo_messaging_rabbit] rabbit_quorum_queue``, or
durable where ``amqp_durable_queues`` is off) makes the link reconnect at once, again and again,
without back-off, and the notification never arrives."""

from __future__ import annotations

import time
from collections.abc import Iterator

import oslo_messaging as messaging
import pytest
from oslo_config import cfg

from fleetcache.cmd.common import register_messaging_opts
from fleetcache.common import config, rpc
from fleetcache.common.leanamqp import broker
from fleetcache.common.leanamqp.notifier import AmqpNotifier
from tests.integration.daemons import private_vhost
from tests.integration.test_lean_notify import Sink

pytestmark = pytest.mark.integration

VHOST = "/fctest_review_lean_declare"
URL = f"rabbit://guest:guest@127.0.0.1:5672/{VHOST}"


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    with private_vhost(VHOST):
        yield VHOST


def _conf(**rabbit: object) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    register_messaging_opts(conf)
    conf([], project="fleetcache", default_config_files=[])
    broker.register_opts(conf)
    for name, value in rabbit.items():
        conf.set_override(name, value, group="oslo_messaging_rabbit")
    return conf


def _declared_by_oslo(conf: cfg.ConfigOpts, sink: Sink,
                      topic: str = "notifications") -> tuple[rpc.Transports, object]:
    """oslo.messaging's listener declares ``<topic>.info`` as ``conf`` says."""
    transports = rpc.Transports(conf)
    listener = messaging.get_notification_listener(
        transports.notification(URL), [messaging.Target(topic=topic)], [sink],
        executor="threading")
    listener.start()
    return transports, listener


@pytest.mark.parametrize("rabbit", [
    # oslo.messaging's quorum notification queues; the lean notifier declares a classic one
    {"rabbit_quorum_queue": True, "amqp_durable_queues": True},
])
def test_the_lean_notifier_delivers_to_a_queue_oslo_messaging_declared(
        vhost: str, rabbit: dict[str, object]) -> None:
    conf = _conf(**rabbit)
    sink = Sink()
    transports, listener = _declared_by_oslo(conf, sink)
    notifier = AmqpNotifier(broker.params_for(conf, URL), "fleetcache-conductor:h1",
                            ["notifications"], name="lean-notify-review-q")
    try:
        notifier.info(None, "aggregate.cache_images.start", {"n": 1})
        deadline = time.monotonic() + 15
        while not sink.seen and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sink.seen, (f"never delivered; the link opened {notifier.connects} broker "
                           f"connections in 15 s ({notifier._down_reason})")
    finally:
        notifier.close()
        listener.stop()  # type: ignore[attr-defined]
        listener.wait()  # type: ignore[attr-defined]
        transports.cleanup()


def test_a_declaration_the_broker_refuses_does_not_spin_reconnecting(vhost: str) -> None:
    # Another service (amqp_durable_queues = true) declared the queue durable; this
    # conductor runs with the default (false): RabbitMQ answers 406 PRECONDITION_FAILED.
    durable = _conf(amqp_durable_queues=True)
    sink = Sink()
    transports, listener = _declared_by_oslo(durable, sink, topic="review_durable")
    listener.stop()  # type: ignore[attr-defined]
    listener.wait()  # type: ignore[attr-defined]
    transports.cleanup()
    conf = _conf()  # rabbit_retry_interval = 1 s by default
    notifier = AmqpNotifier(broker.params_for(conf, URL), "fleetcache-conductor:h1",
                            ["review_durable"], name="lean-notify-review-d")
    try:
        notifier.info(None, "aggregate.cache_images.start", {"n": 1})
        time.sleep(3)
        connects = notifier.connects
        # oslo.messaging (kombu's ensure) waits rabbit_retry_interval, growing by
        # rabbit_retry_backoff, between attempts: a few connections in 3 s at most.
        assert connects <= 4, (f"{connects} broker connections in 3 s: the link reconnects "
                               f"at once after each refusal ({notifier._down_reason})")
    finally:
        notifier.close()
