"""The conductor's lean notifier against a real oslo.messaging notification listener on the
real RabbitMQ: the same notification as oslo.messaging's ``messagingv2`` notifier sends, kept
in its queue when nobody listens yet, sent again after the connection is lost, to a queue
declared as oslo.messaging declares it for the same options (quorum...), and, when the broker
refuses the declaration, kept and tried again after a growing back-off, never in a loop,
the newest of them up to the bound."""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import amqp
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


def _conf(exchange: str | None = None, **rabbit: object) -> cfg.ConfigOpts:
    """A service's options: ``[DEFAULT] control_exchange``, ``[oslo_messaging_rabbit]``."""
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    register_messaging_opts(conf)
    conf([], project="fleetcache", default_config_files=[])
    broker.register_opts(conf)
    if exchange is not None:
        conf.set_override("control_exchange", exchange)
    for name, value in rabbit.items():
        conf.set_override(name, value, group="oslo_messaging_rabbit")
    return conf


@pytest.fixture
def conf(vhost: str) -> cfg.ConfigOpts:
    return _conf()


def _listen(conf: cfg.ConfigOpts, transports: rpc.Transports, sink: Sink,
            topic: str = "notifications") -> Any:
    listener = messaging.get_notification_listener(
        transports.notification(URL), [messaging.Target(topic=topic)], [sink],
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


def _forget(queue: str, exchange: str | None = None) -> None:
    """Delete what an earlier run left in the vhost, declared with other arguments."""
    conn = amqp.Connection(host="127.0.0.1:5672", userid="guest", password="guest",
                           virtual_host=VHOST)
    conn.connect()
    try:
        channel = conn.channel()
        channel.queue_delete(queue)
        if exchange is not None:
            channel.exchange_delete(exchange)
    finally:
        conn.close()


def _await(notifier: AmqpNotifier, predicate: Any, timeout: float, what: str) -> None:
    """:func:`wait_for`, saying on failure how often the notifier connected, and why not."""
    try:
        wait_for(predicate, timeout, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {notifier.connects} broker connections, the last "
                             f"down: {notifier._down_reason}") from None


def _messages(caplog: pytest.LogCaptureFixture, part: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if part in r.getMessage()]


@pytest.mark.parametrize("rabbit", [
    {"rabbit_quorum_queue": True},  # durable too, whatever amqp_durable_queues says
    {"rabbit_quorum_queue": True, "rabbit_quorum_delivery_limit": 3},
    {"amqp_durable_queues": True},
])
def test_notifications_reach_the_queue_oslo_messaging_declared_with_the_same_options(
        vhost: str, rabbit: dict[str, object], caplog: pytest.LogCaptureFixture) -> None:
    _forget("options.info", "fctest_options")
    conf = _conf("fctest_options", **rabbit)
    transports = rpc.Transports(conf)
    sink = Sink()
    listener = _listen(conf, transports, sink, topic="options")  # declares options.info
    notifier = AmqpNotifier(broker.params_for(conf, URL), "fleetcache-conductor:h1",
                            ["options"], name="lean-notify-options")
    try:
        notifier.info(None, "aggregate.cache_images.start", {"n": 1})
        _await(notifier, lambda: len(sink.seen) == 1, 15, "the notification")
        assert notifier.connects == 1
        assert not _messages(caplog, "other arguments")  # declared as oslo.messaging did
    finally:
        notifier.close()
        listener.stop()
        listener.wait()
        transports.cleanup()


def test_a_queue_another_service_declared_otherwise_gets_the_notifications(
        vhost: str, caplog: pytest.LogCaptureFixture) -> None:
    # Another service (amqp_durable_queues = true) declared the exchange and the queue
    # durable; this conductor runs with the default (false): RabbitMQ answers 406
    # PRECONDITION_FAILED to its declaration, as it does to oslo.messaging's notifier.
    _forget("durable.info", "fctest_durable")
    other = _conf("fctest_durable", amqp_durable_queues=True)
    other_transports = rpc.Transports(other)
    sink = Sink()
    declarer = _listen(other, other_transports, sink, topic="durable")
    declarer.stop()
    declarer.wait()
    listener = None
    notifier = AmqpNotifier(broker.params_for(_conf("fctest_durable"), URL),
                            "fleetcache-conductor:h1", ["durable"], name="lean-notify-durable")
    try:
        payload = {"run": uuid.uuid4().hex}
        notifier.info(None, "aggregate.cache_images.start", payload)
        _await(notifier, lambda: not notifier._outbox and not notifier._to_publish
               and not notifier._unconfirmed, 10, "the broker's confirm")
        assert notifier.connects == 1
        (warning,) = _messages(caplog, "other arguments")
        assert "inequivalent arg 'durable'" in warning
        listener = _listen(other, other_transports, sink, topic="durable")
        wait_for(lambda: any(s[3] == payload for s in sink.seen), 15, "the notification")
    finally:
        notifier.close()
        if listener is not None:
            listener.stop()
            listener.wait()
        other_transports.cleanup()


def _guest_may_configure(pattern: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", "set_permissions", "-p", VHOST, "guest", pattern,
                    ".*", ".*"], capture_output=True, check=True, timeout=60)


@contextlib.contextmanager
def _refused(topic: str, max_waiting: int | None = None, **rabbit: object
             ) -> Iterator[tuple[AmqpNotifier, Callable[[], Sink]]]:
    """A notifier to ``topic`` whose queue the broker refuses to declare (403 ACCESS_REFUSED),
    and ``grant()``: the operator gives the permission back; a listener starts (its sink)."""
    _forget(f"{topic}.info")
    conf = _conf(**rabbit)
    transports = rpc.Transports(conf)
    notifier = AmqpNotifier(broker.params_for(conf, URL), "fleetcache-conductor:h1", [topic],
                            max_waiting=max_waiting, name=f"lean-notify-{topic}")
    listeners: list[Any] = []

    def grant() -> Sink:
        _guest_may_configure(".*")
        sink = Sink()
        listeners.append(_listen(conf, transports, sink, topic=topic))
        return sink

    _guest_may_configure(rf"^(?!{topic}\.).*")
    try:
        yield notifier, grant
    finally:
        _guest_may_configure(".*")
        notifier.close()
        for listener in listeners:
            listener.stop()
            listener.wait()
        transports.cleanup()


def test_a_declaration_the_broker_refuses_is_tried_again_after_a_growing_back_off(
        vhost: str, caplog: pytest.LogCaptureFixture) -> None:
    with _refused("denied", rabbit_retry_interval=1, rabbit_retry_backoff=2,
                  rabbit_interval_max=4) as (notifier, grant):
        with caplog.at_level(logging.WARNING):
            notifier.info(None, "aggregate.cache_images.start", {"n": 1})
            time.sleep(6)  # attempts at 0, 1 and 4 s; the next at 8 s
            connects = notifier.connects
            refusals = _messages(caplog, "the broker refused")
        assert 2 <= connects <= 3, f"{connects} broker connections in 6 s"
        assert len(refusals) == connects  # one line per attempt, with the broker's reason
        assert all("ACCESS_REFUSED" in r and "1 message(s) kept" in r for r in refusals)
        sink = grant()  # the operator fixes the permission: nothing was lost
        _await(notifier, lambda: len(sink.seen) == 1, 15, "the notification kept meanwhile")


def test_while_the_broker_refuses_only_the_newest_notifications_are_kept_up_to_the_bound(
        vhost: str, caplog: pytest.LogCaptureFixture) -> None:
    with _refused("bounded", max_waiting=2, rabbit_retry_interval=1, rabbit_retry_backoff=1,
                  rabbit_interval_max=2) as (notifier, grant):
        with caplog.at_level(logging.WARNING):
            for n in range(1, 6):
                notifier.info(None, "aggregate.cache_images.progress", {"n": n})
            _await(notifier, lambda: notifier.shed == 3, 15, "the oldest three dropped")
        assert _messages(caplog, "dropped so far")  # said in the log, with the broker's reason
        sink = grant()
        _await(notifier, lambda: len(sink.seen) == 2, 20, "the two newest notifications")
        time.sleep(1)  # nothing else comes
        assert [s[3]["n"] for s in sink.seen] == [4, 5]
