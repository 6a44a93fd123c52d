"""The frames of one ``basic.publish`` (AMQP 0-9-1, section 4.2), as bytes ready to send.

A publish is three frames or more: the method frame (``basic.publish``: exchange, routing key,
no ``mandatory``/``immediate``), the content header (body size and the properties), and the
body, cut into frames of at most ``frame_max - 8`` bytes. Every message of a link has the same
properties but the expiration: ``application/json``, ``utf-8``, persistent (delivery mode 2),
as oslo.messaging's rabbit driver publishes them.

NOTE: written by hand rather than through py-amqp's ``Channel.basic_publish``: building an
``amqp.Message`` and serializing it through py-amqp's generic property and frame writers took
19.6 % of the conductor's GIL samples in ``bench/fanout.py --hosts 1000 --concurrency 64``
(docs/performance.md, "Publishing without py-amqp's message, and calls without a thread
each (issue 12, 2026-11-26)"). The bytes are the same as py-amqp's:
``tests/unit/common/test_leanamqp_frames.py`` compares them.
"""

from __future__ import annotations

import struct

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_END = b"\xce"

#: Class and method ids of ``basic.publish``.
BASIC = 60
PUBLISH = 40

#: Property flags of the content header (bit 15 is the first property of the basic class).
_CONTENT_TYPE = 1 << 15
_CONTENT_ENCODING = 1 << 14
_DELIVERY_MODE = 1 << 12
_EXPIRATION = 1 << 8

_FIXED_FLAGS = _CONTENT_TYPE | _CONTENT_ENCODING | _DELIVERY_MODE
#: content_type, content_encoding and delivery_mode, serialized in property order.
_FIXED_PROPERTIES = b"\x10application/json" b"\x05utf-8" b"\x02"

_FRAME_HEAD = struct.Struct(">BHI")
_HEADER_HEAD = struct.Struct(">HHQH")


def shortstr(text: str) -> bytes:
    """An AMQP short string: one length byte, then at most 255 bytes of UTF-8.

    :raises ValueError: longer than 255 bytes.
    """
    data = text.encode()
    if len(data) > 255:
        raise ValueError(f"an AMQP short string holds at most 255 bytes, not {len(data)}")
    return bytes((len(data),)) + data


def _frame(kind: int, channel: int, payload: bytes) -> bytes:
    return _FRAME_HEAD.pack(kind, channel, len(payload)) + payload + FRAME_END


def publish(channel: int, frame_max: int, exchange: str, routing_key: str, body: bytes,
            expiration: str | None = None) -> bytes:
    """Every frame of publishing ``body`` to ``exchange`` with ``routing_key``.

    :param frame_max: the connection's negotiated largest frame, its 8 bytes of framing
        included.
    :param expiration: the message's TTL in milliseconds, as text (AMQP's ``expiration``).
    """
    method = (struct.pack(">HHH", BASIC, PUBLISH, 0) + shortstr(exchange)
              + shortstr(routing_key) + b"\x00")
    flags = _FIXED_FLAGS
    properties = _FIXED_PROPERTIES
    if expiration is not None:
        flags |= _EXPIRATION
        properties += shortstr(expiration)
    header = _HEADER_HEAD.pack(BASIC, 0, len(body), flags) + properties
    parts = [_frame(FRAME_METHOD, channel, method), _frame(FRAME_HEADER, channel, header)]
    chunk = frame_max - 8 if frame_max else max(len(body), 1)  # 0: the broker sets no limit
    for start in range(0, len(body), chunk):
        parts.append(_frame(FRAME_BODY, channel, body[start:start + chunk]))
    return b"".join(parts)
