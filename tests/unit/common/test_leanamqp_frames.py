"""The hand-written ``basic.publish`` frames are byte for byte py-amqp's."""

from __future__ import annotations

import types

import amqp
import pytest
from amqp import spec
from amqp.method_framing import frame_writer
from amqp.serialization import dumps

from fleetcache.common.leanamqp import frames


def _py_amqp_publish(channel: int, frame_max: int, exchange: str, routing_key: str,
                     body: bytes, expiration: str | None) -> bytes:
    """What py-amqp's ``Channel.basic_publish`` writes for the same message."""
    written: list[bytes] = []
    transport = types.SimpleNamespace(write=lambda data: written.append(bytes(data)))
    write = frame_writer(types.SimpleNamespace(frame_max=frame_max, bytes_sent=0), transport)
    message = amqp.Message(body, content_type="application/json", content_encoding="utf-8",
                           delivery_mode=2)
    if expiration is not None:
        message.properties["expiration"] = expiration
    args = dumps("Bssbb", (0, exchange, routing_key, False, False))
    write(1, channel, spec.Basic.Publish, args, message)
    return b"".join(written)


@pytest.mark.parametrize("expiration", [None, "60000"])
@pytest.mark.parametrize("size", [0, 1, 4000, 131072 - 8, 131072 * 3 + 17])
def test_publish_frames_are_py_amqps(size: int, expiration: str | None) -> None:
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    ours = frames.publish(1, 131072, "openstack", "compute.host-0001", body, expiration)
    assert ours == _py_amqp_publish(1, 131072, "openstack", "compute.host-0001", body,
                                    expiration)


def test_a_large_body_is_cut_into_frames_of_at_most_frame_max() -> None:
    data = frames.publish(2, 4096, "openstack", "notifications.info", b"x" * 10000)
    offset, kinds = 0, []
    while offset < len(data):
        kind, channel, size = int(data[offset]), int.from_bytes(data[offset + 1:offset + 3]), \
            int.from_bytes(data[offset + 3:offset + 7])
        assert channel == 2 and size + 8 <= 4096
        assert data[offset + 7 + size] == 0xCE
        kinds.append(kind)
        offset += size + 8
    assert kinds == [1, 2, 3, 3, 3]


def test_a_routing_key_over_255_bytes_is_refused() -> None:
    with pytest.raises(ValueError, match="255 bytes"):
        frames.publish(1, 131072, "openstack", "compute." + "h" * 250, b"{}")
