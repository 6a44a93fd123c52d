"""oslo.messaging's RPC wire format (18.x, ``_drivers/amqpdriver.py`` and ``_drivers/amqp.py``).

A call is a JSON envelope ``{"oslo.version": "2.0", "oslo.message": "<json>"}`` whose inner
message holds ``method``, ``args``, ``version``, the caller's context as ``_context_<key>``
entries, ``_msg_id`` (matches the reply), ``_reply_q`` (the queue the reply goes to, on the
default exchange), ``_unique_id`` (the server drops a duplicate) and ``_timeout`` (the call
monitor: the server sends a reply with ``ending`` false every ``_timeout / 2`` seconds while
the call runs). A reply is the same envelope around ``result``, ``failure`` (a serialized
remote exception) and ``ending``.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import oslo_messaging as messaging
from oslo_messaging._drivers import common as rpc_common

ENVELOPE_VERSION = "2.0"


def call_body(
    method: str, args: Mapping[str, Any], version: str | None, context: Mapping[str, Any],
    msg_id: str, reply_q: str, call_monitor_timeout: int | None,
) -> bytes:
    """The envelope of one call, as oslo.messaging's ``RPCClient.call`` builds it."""
    msg: dict[str, Any] = {"method": method, "args": dict(args)}
    if version is not None:
        msg["version"] = version
    msg["_msg_id"] = msg_id
    msg["_reply_q"] = reply_q
    msg["_timeout"] = call_monitor_timeout
    msg["_unique_id"] = uuid.uuid4().hex
    for key, value in context.items():
        msg[f"_context_{key}"] = value
    envelope = {"oslo.version": ENVELOPE_VERSION, "oslo.message": json.dumps(msg)}
    return json.dumps(envelope).encode()


class Reply(NamedTuple):
    """One reply message: a heartbeat (``ending`` false, no result) or the call's end."""

    msg_id: str | None
    result: Any
    failure: str | None
    ending: bool


def parse_reply(body: bytes | str) -> Reply:
    """Decode a reply (envelope 2.0, or the bare dict of servers without an envelope).

    :raises ValueError: not JSON, or not an object.
    """
    outer = json.loads(body)
    if not isinstance(outer, dict):
        raise ValueError("a reply is a JSON object")
    inner = outer.get("oslo.message")
    msg = json.loads(inner) if isinstance(inner, str) else outer
    if not isinstance(msg, dict):
        raise ValueError("a reply's message is a JSON object")
    return Reply(msg.get("_msg_id"), msg.get("result"), msg.get("failure"),
                 bool(msg.get("ending", False)))


def remote_error(failure: str, allowed_exmods: Sequence[str]) -> Exception:
    """The server's exception, re-created as oslo.messaging's client does: the same class when
    its module is allowed (``fleetcache.common.exception``, the built-ins), else
    ``RemoteError`` (``"Remote error: <Type> <message>"``)."""
    return rpc_common.deserialize_remote_exception(  # type: ignore[no-any-return]
        failure, list(allowed_exmods))


def timeout_error(msg_id: str, reply_q: str, why: str | None = None) -> Exception:
    """``MessagingTimeout`` worded as oslo.messaging's, with the cause when one is known (the
    broker connection was lost, the call could not be published)."""
    text = f"Timed out waiting for a reply {reply_q} to message ID {msg_id}."
    error: Exception = messaging.MessagingTimeout(text if why is None else f"{text} {why}")
    return error


def notification_body(publisher_id: str, event_type: str, priority: str, payload: Any,
                      context: Mapping[str, Any]) -> bytes:
    """A notification of oslo.messaging's ``messagingv2`` driver (``Notifier._notify``): the
    same envelope around ``message_id``, ``publisher_id``, ``event_type``, ``priority``,
    ``payload``, ``timestamp`` (naive UTC, ``str(datetime)``), ``_unique_id`` and the
    context's ``_context_<key>`` entries."""
    msg: dict[str, Any] = {
        "message_id": str(uuid.uuid4()), "publisher_id": publisher_id,
        "event_type": event_type, "priority": priority, "payload": payload,
        "timestamp": str(datetime.datetime.now(datetime.UTC).replace(tzinfo=None)),
        "_unique_id": uuid.uuid4().hex,
    }
    for key, value in context.items():
        msg[f"_context_{key}"] = value
    envelope = {"oslo.version": ENVELOPE_VERSION, "oslo.message": json.dumps(msg)}
    return json.dumps(envelope).encode()
