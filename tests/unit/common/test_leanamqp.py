"""Tests of fleetcache.common.leanamqp's pieces without a broker: the wire format, which
transports it serves, and the caller's reply matching, call-monitor deadlines and confirms
(driven through its connection thread's handlers; the real broker is in
tests/integration/test_lean_calls.py)."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any

import oslo_messaging as messaging
import pytest
from oslo_config import cfg
from oslo_messaging._drivers import common as rpc_common

from fleetcache.common import exception, rpc
from fleetcache.common.leanamqp import broker, caller, wire
from tests.unit.common.clock import Clock

# -- wire -------------------------------------------------------------------------------------


def _inner(body: bytes) -> dict[str, Any]:
    outer = json.loads(body)
    assert outer["oslo.version"] == "2.0"
    inner: dict[str, Any] = json.loads(outer["oslo.message"])
    return inner


def test_a_call_is_oslo_messagings_envelope_with_context_keys() -> None:
    body = wire.call_body("cache_images", {"image_ids": ["a"]}, "1.2",
                          {"request_id": "req-1", "is_admin": True}, "m1", "reply_q1", 60)
    msg = _inner(body)
    unique_id = msg.pop("_unique_id")
    assert len(unique_id) == 32
    assert msg == {"method": "cache_images", "args": {"image_ids": ["a"]}, "version": "1.2",
                   "_msg_id": "m1", "_reply_q": "reply_q1", "_timeout": 60,
                   "_context_request_id": "req-1", "_context_is_admin": True}
    again = _inner(wire.call_body("m", {}, None, {}, "m2", "q", None))
    assert again["_unique_id"] != unique_id
    assert "version" not in again and again["_timeout"] is None


def test_replies_are_read_with_or_without_the_envelope() -> None:
    inner = {"_msg_id": "m1", "result": {"a": 1}, "failure": None, "ending": True}
    enveloped = json.dumps(rpc_common.serialize_msg(inner))
    assert wire.parse_reply(enveloped) == wire.Reply("m1", {"a": 1}, None, True)
    assert wire.parse_reply(json.dumps({"_msg_id": "m2", "result": None, "ending": False})
                            ) == wire.Reply("m2", None, None, False)
    with pytest.raises(ValueError):
        wire.parse_reply(b"not json")
    with pytest.raises(ValueError):
        wire.parse_reply(b"[1]")


def _failure(exc: Exception) -> str:
    try:
        raise exc
    except Exception:  # noqa: BLE001 - serialized as a server would
        return rpc_common.serialize_remote_exception(sys.exc_info())  # type: ignore[no-any-return]


def test_remote_exceptions_come_back_as_oslo_messaging_makes_them() -> None:
    error = wire.remote_error(_failure(exception.InvalidInput(reason="bad")), rpc.ALLOWED_EXMODS)
    assert isinstance(error, exception.InvalidInput) and "bad" in str(error)
    error = wire.remote_error(_failure(KeyError("k")), [])
    assert isinstance(error, KeyError)
    error = wire.remote_error(_failure(exception.InvalidInput(reason="bad")), [])
    assert isinstance(error, messaging.RemoteError)
    assert str(error).startswith("Remote error: InvalidInput")


def test_a_timeout_is_a_messaging_timeout_with_its_cause() -> None:
    error = wire.timeout_error("m1", "reply_q", "The broker connection is down: x.")
    assert isinstance(error, messaging.MessagingTimeout)
    assert str(error) == ("Timed out waiting for a reply reply_q to message ID m1. "
                          "The broker connection is down: x.")

# -- broker -----------------------------------------------------------------------------------


def test_a_plain_rabbit_url_is_served(conf: cfg.ConfigOpts) -> None:
    params = broker.params_for(conf, "rabbit://u:p%40ss@h1:5673,u2:q@h2/fleetcache_cell1")
    assert [(h.hostname, h.port, h.userid, h.password) for h in params.hosts] == [
        ("h1", 5673, "u", "p@ss"), ("h2", 5672, "u2", "q")]
    assert params.virtual_host == "fleetcache_cell1"
    assert params.exchange == conf.control_exchange
    assert params.heartbeat == 60 and params.reply_queue_ttl == 1800
    assert broker.params_for(conf, "rabbit://u:p@h//cell").virtual_host == "/cell"
    assert broker.params_for(conf, "rabbit://u:p@h/").virtual_host == "/"


@pytest.mark.parametrize(("url", "option", "reason"), [
    ("fake:///", None, "driver 'fake'"),
    ("rabbit://u:p@h/?ssl=1", None, "URL options"),
    ("rabbit://u:p@h/", "ssl", "ssl"),
    ("rabbit://u:p@h/", "rabbit_transient_quorum_queue", "quorum"),
    ("rabbit://u:p@h/", "rabbit_ha_queues", "rabbit_ha_queues"),
])
def test_other_transports_are_left_to_oslo_messaging(
        conf: cfg.ConfigOpts, url: str, option: str | None, reason: str) -> None:
    broker.register_opts(conf)
    if option is not None:
        conf.set_override(option, True, group="oslo_messaging_rabbit")
    with pytest.raises(broker.Unsupported, match=reason):
        broker.params_for(conf, url)


def test_oslo_messagings_tracing_keeps_its_client(conf: cfg.ConfigOpts) -> None:
    rpc.init(conf)
    conf.set_override("tracing_enabled", True, group="oslo_messaging_tracing")
    with pytest.raises(broker.Unsupported, match="tracing_enabled"):
        broker.params_for(conf, "rabbit://u:p@h/")

# -- the caller's handlers --------------------------------------------------------------------



@pytest.fixture
def lean(conf: cfg.ConfigOpts) -> Any:
    lean = caller.AmqpCaller(broker.params_for(conf, "rabbit://u:p@h/"), rpc.ALLOWED_EXMODS)
    yield lean
    lean.close()


def _pending(lean: Any, timeout: float = 1800, monitor: int | None = 60,
             on_done: Any = None) -> Any:
    call = caller._Call(f"m{len(lean._calls)}", b"{}", "compute.h", timeout, monitor, on_done)
    lean._outbox.append(call)
    lean._take_outbox()  # not connected: kept to publish once connected
    return call


def _reply(lean: Any, msg_id: str, tag: int = 1, **fields: Any) -> None:
    body = json.dumps(rpc_common.serialize_msg({"_msg_id": msg_id, **fields}))
    lean._on_reply(SimpleNamespace(body=body, delivery_info={"delivery_tag": tag}))


def test_a_reply_settles_its_own_call_only(lean: Any, clock: Clock) -> None:
    first, second = _pending(lean), _pending(lean)
    assert list(lean._to_publish) == [first, second]
    _reply(lean, second.msg_id, tag=7, result={"x": 1}, failure=None, ending=True)
    assert second.done.acquire(blocking=False) and second.value == {"x": 1}
    assert not second.failed and not first.settled and list(lean._calls) == [first.msg_id]
    assert lean._ack_upto == 7
    _reply(lean, "unknown", tag=8, result=1, ending=True)  # late or duplicate: dropped
    assert list(lean._calls) == [first.msg_id]


def test_heartbeats_push_the_call_monitor_deadline_back_up_to_the_hard_limit(
        lean: Any, clock: Clock) -> None:
    call = _pending(lean, timeout=150, monitor=60)
    assert call.deadline == 1060.0 and call.expiration == "150000"
    clock.now = 1050.0
    _reply(lean, call.msg_id, result=None, failure=None, ending=False)
    assert call.deadline == 1110.0
    clock.now = 1061.0
    lean._expire()  # the first deadline has passed, but a heartbeat moved it
    assert not call.settled
    clock.now = 1100.0
    _reply(lean, call.msg_id, result=None, failure=None, ending=False)
    assert call.deadline == 1150.0  # the hard limit, not 1160
    clock.now = 1150.0
    lean._expire()
    assert call.settled and call.failed
    assert isinstance(call.value, messaging.MessagingTimeout)


def test_without_heartbeats_a_call_times_out_at_the_call_monitor(
        lean: Any, clock: Clock) -> None:
    call = _pending(lean, monitor=60)
    clock.now = 1059.9
    lean._expire()
    assert not call.settled
    lean._down_reason = "ConnectionRefusedError: refused"
    clock.now = 1060.0
    lean._expire()
    assert call.failed and "The broker connection is down: ConnectionRefusedError" in str(
        call.value)
    assert not lean._calls and not lean._deadlines


def test_a_failure_reply_raises_the_remote_exception(lean: Any, clock: Clock) -> None:
    call = _pending(lean)
    _reply(lean, call.msg_id, result=None, ending=True,
           failure=_failure(exception.InvalidInput(reason="bad")))
    assert call.failed and isinstance(call.value, exception.InvalidInput)


def test_confirms_are_taken_as_they_come_and_a_refusal_fails_its_call(
        lean: Any, clock: Clock) -> None:
    calls = [_pending(lean) for _ in range(4)]
    lean._unconfirmed.extend((i + 1, call) for i, call in enumerate(calls))
    lean._on_confirm(2, True)
    assert [tag for tag, _ in lean._unconfirmed] == [3, 4]
    lean._on_refusal(4, False)
    assert calls[3].failed and isinstance(calls[3].value, messaging.MessageDeliveryFailure)
    assert [tag for tag, _ in lean._unconfirmed] == [3]
    assert not any(c.settled for c in calls[:3])


def test_a_lost_connection_publishes_unconfirmed_calls_again_first(
        lean: Any, clock: Clock) -> None:
    confirmed, unconfirmed, waiting = _pending(lean), _pending(lean), _pending(lean)
    lean._to_publish.clear()
    lean._to_publish.append(waiting)
    lean._unconfirmed.append((2, unconfirmed))
    lean._lost(ConnectionResetError("reset"))
    assert list(lean._to_publish) == [unconfirmed, waiting]
    assert confirmed.msg_id in lean._calls and lean._down_reason.startswith("ConnectionReset")


def test_a_notification_is_the_messagingv2_drivers_envelope() -> None:
    msg = _inner(wire.notification_body("fleetcache-conductor:h", "aggregate.x", "INFO",
                                        {"host": "c1"}, {"request_id": "req-1"}))
    assert len(msg.pop("_unique_id")) == 32 and len(msg.pop("message_id")) == 36
    timestamp = msg.pop("timestamp")
    assert len(timestamp) == 26 and timestamp[10] == " "  # str() of a naive UTC datetime
    assert msg == {"publisher_id": "fleetcache-conductor:h", "event_type": "aggregate.x",
                   "priority": "INFO", "payload": {"host": "c1"},
                   "_context_request_id": "req-1"}


def test_ended_calls_do_not_pile_up_in_the_deadline_heap(lean: Any, clock: Clock) -> None:
    live = _pending(lean)
    for _ in range(200):
        call = _pending(lean)
        _reply(lean, call.msg_id, result=1, failure=None, ending=True)
        assert call.body == b""
    lean._expire()
    assert [c for _, _, c in lean._deadlines] == [live]


def test_an_async_call_hands_its_reply_or_its_error_to_its_function_once(
        lean: Any, clock: Clock) -> None:
    outcomes: list[tuple[Any, bool]] = []
    answered = _pending(lean, on_done=lambda value, failed: outcomes.append((value, failed)))
    timed_out = _pending(lean, monitor=60,
                         on_done=lambda value, failed: outcomes.append((value, failed)))
    assert answered.done is None and timed_out.done is None  # no lock: nobody blocks on it
    _reply(lean, answered.msg_id, result={"x": 1}, failure=None, ending=True)
    _reply(lean, answered.msg_id, result={"x": 2}, failure=None, ending=True)  # a duplicate
    clock.now = 1060.0
    lean._expire()
    assert outcomes[0] == ({"x": 1}, False)
    assert outcomes[1][1] and isinstance(outcomes[1][0], messaging.MessagingTimeout)
    assert len(outcomes) == 2 and not lean._calls


def test_a_failing_handler_is_logged_and_the_link_goes_on(
        lean: Any, clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    def broken(value: Any, failed: bool) -> None:
        raise RuntimeError("handler bug")

    call, other = _pending(lean, on_done=broken), _pending(lean)
    _reply(lean, call.msg_id, result=1, failure=None, ending=True)
    assert "the handler of call" in caplog.text and call.msg_id not in lean._calls
    _reply(lean, other.msg_id, tag=2, result=2, failure=None, ending=True)
    assert other.done.acquire(blocking=False) and other.value == 2


def test_a_closing_caller_ends_every_call_left_and_refuses_new_ones(conf: cfg.ConfigOpts) -> None:
    # Nothing listens on port 1: the calls wait for a connection, as after a broker loss.
    lean = caller.AmqpCaller(broker.params_for(conf, "rabbit://u:p@127.0.0.1:1/"),
                             rpc.ALLOWED_EXMODS)
    outcomes: list[tuple[Any, bool]] = []
    lean.call_async("compute.h", "cache_images", {}, version="1.0", context={}, timeout=600,
                    on_done=lambda value, failed: outcomes.append((value, failed)))
    lean.close()
    assert len(outcomes) == 1 and outcomes[0][1]
    assert "The caller is closed." in str(outcomes[0][0])
    with pytest.raises(messaging.MessageDeliveryFailure, match="closed"):
        lean.call_async("compute.h", "cache_images", {}, version="1.0", context={},
                        timeout=600, on_done=lambda value, failed: None)


def test_the_buffered_recv_hands_out_what_one_recv_brought() -> None:
    import socket

    from fleetcache.common.leanamqp.broker import RECV_SIZE, BufferedRecv

    ours, peer = socket.socketpair()
    asked: list[int] = []

    def recv_into(buf: bytearray) -> int:
        asked.append(len(buf))
        return ours.recv_into(buf)

    try:
        buffered = BufferedRecv(SimpleNamespace(recv_into=recv_into))  # type: ignore[arg-type]
        assert not buffered.pending
        peer.sendall(b"0123456789")
        first = buffered(7)
        assert first == b"0123456" and type(first) is bytes and buffered.pending
        assert buffered(7) == b"789"  # at most what is left; py-amqp asks again for the rest
        assert not buffered.pending
        peer.sendall(b"ab")
        assert buffered(1) == b"a" and buffered(5) == b"b"
        assert first == b"0123456"  # what was handed out is a copy: the next recv kept it
        peer.close()
        assert buffered(1) == b""  # the peer closed
        assert asked == [RECV_SIZE] * 3
    finally:
        ours.close()
        peer.close()
