"""Tests of the lean notifier (fleetcache.common.leanamqp.notifier) and of its link's
reconnection without a broker: the thread never starts, and the test drives its steps on fake
py-amqp connections (the real RabbitMQ is in tests/integration/test_lean_notify.py)."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace
from typing import Any

import amqp
import pytest
from oslo_config import cfg
from oslo_messaging._drivers import impl_rabbit

from fleetcache.common.context import RequestContext
from fleetcache.common.leanamqp import broker
from fleetcache.common.leanamqp.notifier import AmqpNotifier
from tests.unit.common.clock import Clock

DENIED = amqp.exceptions.AccessRefused(
    "ACCESS_REFUSED - access to queue 'a.info' in vhost '/' refused for user 'u'",
    method_name="Queue.declare")
INEQUIVALENT = amqp.exceptions.PreconditionFailed(
    "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'a.info' in vhost '/': "
    "received 'false' but current is 'true'", method_name="Queue.declare")


class FakeChannel:
    """What the link and the notifier call on a py-amqp channel; a refused method raises as
    py-amqp does, after reopening the channel (``Channel._do_revive``)."""

    def __init__(self, conn: FakeConnection, channel_id: int) -> None:
        self.conn = conn
        self.channel_id = channel_id
        self.is_open = True

    def queue_declare(self, queue: str, **kwargs: Any) -> None:
        self.conn.calls.append(("queue_declare", queue, kwargs))
        if self.conn.refuse is not None:
            raise self.conn.refuse

    def queue_bind(self, queue: str, exchange: str, routing_key: str) -> None:
        self.conn.calls.append(("queue_bind", queue, {"routing_key": routing_key}))

    def close(self) -> None:
        self.is_open = False


class FakeConnection:
    frame_max = 131072

    def __init__(self, refuse: Exception | None) -> None:
        self.refuse = refuse
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.written: list[bytes] = []
        self.transport = SimpleNamespace(write=self.written.append)
        self.channels = 0
        self.dropped = False
        self.read_error: Exception | None = None

    def channel(self) -> FakeChannel:
        self.channels += 1
        return FakeChannel(self, self.channels)

    def blocking_read(self, timeout: Any) -> None:
        assert self.read_error is not None
        raise self.read_error

    def collect(self) -> None:
        self.dropped = True

    close = collect


class Unstarted(AmqpNotifier):
    """No thread: what is submitted stays queued for the test to look at or to drive."""

    def _start(self) -> None:
        pass


class Offline(Unstarted):
    """Connects to :class:`FakeConnection`s refusing ``refuse`` (the set-up is py-amqp's
    part, left out: the exchange, confirm mode)."""

    refuse: Exception | None = None
    unreachable = False
    conns: list[FakeConnection]  # opened so far, set by the fixture

    def _set_up(self, conn: Any) -> None:
        self._conn = conn
        self._channel = conn.channel()
        self._declared.clear()
        self._published = 0
        self._recv = SimpleNamespace(pending=False)  # type: ignore[assignment]
        self._sock_poll = SimpleNamespace(poll=lambda timeout: [])



@pytest.fixture
def rabbit(conf: cfg.ConfigOpts) -> cfg.ConfigOpts:
    broker.register_opts(conf)
    for name, value in (("rabbit_retry_interval", 1), ("rabbit_retry_backoff", 2),
                        ("rabbit_interval_max", 4)):
        conf.set_override(name, value, group="oslo_messaging_rabbit")
    return conf


@pytest.fixture
def offline(rabbit: cfg.ConfigOpts, monkeypatch: pytest.MonkeyPatch) -> Any:
    notifier = Offline(broker.params_for(rabbit, "rabbit://u:p@h/"), "p", ["a"])
    conns: list[FakeConnection] = []

    def connect(params: broker.BrokerParams, index: int, name: str) -> FakeConnection:
        if notifier.unreachable:
            raise ConnectionRefusedError("refused")
        conns.append(FakeConnection(notifier.refuse))
        return conns[-1]

    monkeypatch.setattr(broker, "connect", connect)
    notifier.conns = conns
    yield notifier
    notifier.close()


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "the broker refused" in r.getMessage()]


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


@pytest.mark.parametrize("options", [
    {},
    {"amqp_durable_queues": True},
    {"rabbit_quorum_queue": True},
    {"rabbit_quorum_queue": True, "rabbit_quorum_delivery_limit": 5,
     "rabbit_quorum_max_memory_length": 100, "rabbit_quorum_max_memory_bytes": 4096},
])
def test_notification_queues_are_declared_as_oslo_messaging_declares_them(
        offline: Any, rabbit: cfg.ConfigOpts, options: dict[str, Any]) -> None:
    for name, value in options.items():
        rabbit.set_override(name, value, group="oslo_messaging_rabbit")
    offline.params = broker.params_for(rabbit, "rabbit://u:p@h/")
    driver = rabbit.oslo_messaging_rabbit
    expected = impl_rabbit._get_queue_arguments(  # its notifier's call: no HA, no TTL
        False, 0, driver.rabbit_quorum_queue, impl_rabbit.QuorumMemConfig(
            driver.rabbit_quorum_delivery_limit, driver.rabbit_quorum_max_memory_length,
            driver.rabbit_quorum_max_memory_bytes), False)
    offline.info(None, "e", {})
    offline._take_outbox()
    offline._connect()
    (declare, queue, kwargs), bind = offline.conns[0].calls
    assert (declare, queue) == ("queue_declare", "a.info")
    # impl_rabbit's Connection.durable: amqp_durable_queues, or quorum queues
    durable = bool(driver.amqp_durable_queues or driver.rabbit_quorum_queue)
    assert kwargs == {"durable": durable, "auto_delete": False, "arguments": expected}
    assert bind == ("queue_bind", "a.info", {"routing_key": "a.info"})
    assert offline.params.exchange_durable is durable  # the exchange as oslo.messaging's
    assert offline.conns[0].written and offline._conn is offline.conns[0]


def test_a_refused_declaration_keeps_the_notification_and_backs_off_growing(
        offline: Any, clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    offline.refuse = DENIED
    offline.info(None, "e", {"n": 1})
    offline._take_outbox()
    waits = []
    for _ in range(4):
        offline._connect()
        assert offline._conn is None and offline.conns[-1].dropped
        waits.append(offline._next_wakeup())
        clock.now += waits[-1]
    # rabbit_retry_interval 1 s, + rabbit_retry_backoff 2 s, up to rabbit_interval_max 4 s
    assert waits == [1.0, 3.0, 4.0, 4.0]
    assert [o.routing_key for o in offline._to_publish] == ["a.info"]  # kept, not published
    assert not any(conn.written for conn in offline.conns)
    refusals = _refusals(caplog)
    assert len(refusals) == 4  # one line per attempt, with the broker's reason
    assert all("ACCESS_REFUSED - access to queue 'a.info'" in r for r in refusals)
    assert "1 message(s) kept, trying again in 3 s" in refusals[1]


def _wait_after_a_loss(offline: Any) -> float:
    """Seconds the link waits to connect again after losing its connection, the broker
    being unreachable then."""
    offline._lost(ConnectionResetError("reset"))
    offline.unreachable = True
    offline._connect()
    offline.unreachable = False
    wait: float = offline._next_wakeup()
    return wait


def test_the_back_off_starts_over_only_once_the_broker_confirms_again(
        offline: Any, clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    offline.refuse = DENIED
    offline.info(None, "e", {"n": 1})
    offline._take_outbox()
    for _ in range(2):
        offline._connect()
        clock.now += offline._next_wakeup()  # 1 s, then 3 s
    offline.refuse = None  # the operator grants the permission
    offline._connect()
    assert offline._conn is offline.conns[-1] and offline.conns[-1].written
    assert _wait_after_a_loss(offline) == 4.0  # a connection alone does not end the refusal
    clock.now += 4.0
    offline._connect()
    with caplog.at_level(logging.INFO):
        offline._on_confirm(1, False)
    assert not offline._unconfirmed and not offline._to_publish
    assert "the broker accepts messages again" in caplog.text
    offline.info(None, "e", {"n": 2})
    offline._take_outbox()
    assert _wait_after_a_loss(offline) == 1.0  # rabbit_retry_interval again


def test_a_queue_held_with_other_arguments_is_used_as_it_is(
        offline: Any, caplog: pytest.LogCaptureFixture) -> None:
    offline.refuse = INEQUIVALENT
    offline.info(None, "e", {"n": 1})
    offline._take_outbox()
    offline._connect()
    conn = offline.conns[0]
    assert offline._conn is conn and len(offline._unconfirmed) == 1 and conn.written
    assert [c[0] for c in conn.calls] == ["queue_declare", "queue_bind"]
    assert conn.channels == 2  # the publishing channel, and one for the declaration
    offline._lost(ConnectionResetError("reset"))
    offline._connect()  # declared again on the new connection, warned about once
    assert offline.conns[1].written
    warnings = [r.getMessage() for r in caplog.records if "other arguments" in r.getMessage()]
    assert len(warnings) == 1 and "inequivalent arg 'durable'" in warnings[0]
    assert not _refusals(caplog)


def test_a_publish_refused_on_the_channel_backs_off_and_keeps_the_notification(
        offline: Any, clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    offline.info(None, "e", {"n": 1})
    offline._take_outbox()
    offline._connect()
    conn = offline.conns[0]
    assert len(offline._unconfirmed) == 1
    # RabbitMQ closes the channel when a publish is not allowed: read as a ChannelError
    conn.read_error = amqp.exceptions.AccessRefused(
        "ACCESS_REFUSED - write access to exchange 'openstack' refused",
        method_name="Basic.publish")
    offline._read()
    assert offline._conn is None and conn.dropped
    assert offline._next_wakeup() == 1.0
    assert [o.routing_key for o in offline._to_publish] == ["a.info"]
    assert "write access to exchange" in _refusals(caplog)[0]


def test_notifications_left_unconfirmed_at_stop_are_logged(
        conf: cfg.ConfigOpts, caplog: pytest.LogCaptureFixture) -> None:
    notifier = Unstarted(broker.params_for(conf, "rabbit://u:p@h/"), "p", ["a", "b"])
    notifier.info(None, "e", {"n": 1})
    notifier._stopping = True
    with caplog.at_level(logging.WARNING):
        notifier._run()  # the thread's end: nothing connected, two notifications queued
    assert "2 notification(s) not confirmed by the broker are dropped at stop" in caplog.text


def test_an_unreachable_broker_keeps_the_newest_notifications_up_to_the_bound(
        offline: Any, caplog: pytest.LogCaptureFixture) -> None:
    offline.max_waiting = 3
    offline.unreachable = True
    for n in range(1, 6):
        offline.info(None, "e", {"n": n})
        offline._take_outbox()
        offline._connect()  # refused: still nobody to publish to
    assert [json.loads(json.loads(o.body)["oslo.message"])["payload"]["n"]
            for o in offline._to_publish] == [3, 4, 5]  # the oldest two dropped
    assert offline.shed == 2
    shed = [r.getMessage() for r in caplog.records if "dropped so far" in r.getMessage()]
    assert len(shed) == 1  # logged as the count reaches 1, 10, 100...: not per notification
    assert "3 notification(s) wait for a broker that cannot be reached (" in shed[0]
    assert "ConnectionRefusedError: refused" in shed[0]
    offline.unreachable = False
    offline._connect()  # the broker is back: the kept ones go out, in order
    assert len(offline._unconfirmed) == 3 and offline.conns[-1].written


def test_a_broken_connection_sends_its_unconfirmed_notifications_back_under_the_bound(
        offline: Any) -> None:
    offline.max_waiting = 2
    offline._connect()
    for n in range(1, 4):
        offline.info(None, "e", {"n": n})
    offline._take_outbox()
    assert len(offline._unconfirmed) == 3  # connected: nothing is dropped, however many
    offline._lost(ConnectionResetError("reset"))
    offline._take_outbox()
    assert len(offline._to_publish) == 2 and offline.shed == 1


def test_the_count_dropped_is_logged_at_stop_too(
        conf: cfg.ConfigOpts, caplog: pytest.LogCaptureFixture) -> None:
    notifier = Unstarted(broker.params_for(conf, "rabbit://u:p@h/"), "p", ["a"],
                         max_waiting=1)
    for n in range(3):
        notifier.info(None, "e", {"n": n})
    notifier._take_outbox()
    assert notifier.shed == 0  # no connection tried yet: nothing is dropped
    notifier._down_reason = "ConnectionRefusedError: refused"  # the first attempt failed
    notifier._take_outbox()
    notifier._stopping = True
    with caplog.at_level(logging.WARNING):
        notifier._run()
    assert ("1 notification(s) not confirmed by the broker are dropped at stop (the broker: "
            "ConnectionRefusedError: refused); 2 dropped earlier") in caplog.text
