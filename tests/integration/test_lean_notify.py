"""The conductor's lean notifier against a real oslo.messaging notification listener on the
real RabbitMQ: the same notification as oslo.messaging's ``messagingv2`` notifier sends, kept
in its queue when nobody listens yet, and sent again after the connection is lost."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import oslo_messaging as messaging
import pytest
from oslo_config import cfg

from fleetcache.cmd.common import register_messaging_opts
from fleetcache.common import config, rpc
from fleetcache.common.context import RequestContext
from fleetcache.common.leanamqp import broker
from fleetcache.common.leanamqp.notifier import AmqpNotifier
from tests.integration.daemons import private_vhost, wait_for
from tests.integration.test_lean_calls import _close_connection

pytestmark = pytest.mark.integration

VHOST = "/fctest_lean_notify"
URL = f"rabbit://guest:guest@127.0.0.1:5672/{VHOST}"


class Sink:
    """An oslo.messaging notification endpoint keeping what it receives."""

    def __init__(self) -> None:
        self.seen: list[tuple[dict[str, Any], str, str, Any, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def info(self, ctxt: dict[str, Any], publisher_id: str, event_type: str, payload: Any,
             metadata: dict[str, Any]) -> None:
        with self.lock:
            self.seen.append((ctxt, publisher_id, event_type, payload, metadata))


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    with private_vhost(VHOST):
        yield VHOST


@pytest.fixture
def conf(vhost: str) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    register_messaging_opts(conf)
    conf([], project="fleetcache", default_config_files=[])
    broker.register_opts(conf)
    return conf


def _listen(conf: cfg.ConfigOpts, transports: rpc.Transports, sink: Sink) -> Any:
    listener = messaging.get_notification_listener(
        transports.notification(URL), [messaging.Target(topic="notifications")], [sink],
        executor="threading")
    listener.start()
    return listener


def test_a_notification_sent_before_anyone_listens_is_received_as_oslo_sends_it(
        conf: cfg.ConfigOpts) -> None:
    transports = rpc.Transports(conf)
    notifier = AmqpNotifier(broker.params_for(conf, URL), "fleetcache-conductor:h1",
                            ["notifications"])
    ctxt = RequestContext(user_id="u1", project_id="p1", auth_token="s3cret", roles=["admin"])
    listener = None
    try:
        for index in (1, 2):
            notifier.info(ctxt, "aggregate.cache_images.progress", {"host": "c1",
                                                                     "index": index})
        wait_for(lambda: not notifier._outbox and not notifier._to_publish
                 and not notifier._unconfirmed, 10, "the broker's confirms")
        sink = Sink()
        listener = _listen(conf, transports, sink)
        wait_for(lambda: len(sink.seen) == 2, 20, "both notifications")
        ctxt_seen, publisher, event_type, payload, metadata = sink.seen[0]
        assert (publisher, event_type) == ("fleetcache-conductor:h1",
                                           "aggregate.cache_images.progress")
        assert [s[3]["index"] for s in sink.seen] == [1, 2]  # in order
        assert payload == {"host": "c1", "index": 1}
        ctxt_seen.pop("client_timeout", None)  # added by the listener
        assert ctxt_seen == json.loads(json.dumps(ctxt.redacted_copy().to_dict()))
        assert ctxt_seen["request_id"] == ctxt.request_id
        assert "s3cret" not in str(ctxt_seen)  # redacted, as oslo.messaging's notifier does
        assert metadata["message_id"] and metadata["timestamp"]
    finally:
        notifier.close(flush=5)
        if listener is not None:
            listener.stop()
            listener.wait()
        transports.cleanup()


def test_notifications_after_a_lost_connection_arrive(conf: cfg.ConfigOpts) -> None:
    transports = rpc.Transports(conf)
    notifier = AmqpNotifier(broker.params_for(conf, URL), "fleetcache-conductor:h1",
                            ["notifications"], name="lean-notify-test")
    sink = Sink()
    listener = _listen(conf, transports, sink)
    try:
        notifier.info(None, "e.first", {"n": 1})
        wait_for(lambda: len(sink.seen) == 1, 20, "the first notification")
        _close_connection("lean-notify-test")
        notifier.info(None, "e.second", {"n": 2})
        wait_for(lambda: len(sink.seen) == 2, 30, "the notification sent after the loss")
        assert [s[2] for s in sink.seen] == ["e.first", "e.second"]
        assert notifier.connects == 2
    finally:
        notifier.close(flush=5)
        listener.stop()
        listener.wait()
        transports.cleanup()
