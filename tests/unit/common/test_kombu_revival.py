"""Tests of fleetcache.common.kombu_revival: ``kombu.Connection.autoretry`` keeps kombu's
behaviour (first-use connection, revival with a new channel after a connection error, the
``(result, channel)`` return) without defining a class per call."""

from __future__ import annotations

from typing import Any

import kombu
import pytest

from fleetcache.common import kombu_revival


@pytest.fixture
def conn() -> Any:
    kombu_revival.autoretry_without_class_per_call()
    kombu_revival.autoretry_without_class_per_call()  # idempotent
    connection = kombu.Connection("memory://")
    yield connection
    connection.release()


def test_the_patch_is_in_place_and_keeps_kombus_docstring(conn: Any) -> None:
    assert kombu.Connection.autoretry is kombu_revival._autoretry
    assert "channel" in (kombu.Connection.autoretry.__doc__ or "")


def test_without_a_channel_the_connection_is_made_and_its_default_channel_used(
        conn: Any) -> None:
    seen: list[Any] = []

    def publish(value: int, channel: Any = None) -> int:
        seen.append(channel)
        return value * 2

    ensured = conn.autoretry(publish)
    assert ensured.__name__ == "publish(ensured)"
    result, channel = ensured(21)
    assert result == 42
    assert channel is conn.default_channel
    assert seen == [channel]


def test_a_given_channel_is_used(conn: Any) -> None:
    given = conn.channel()
    result, channel = conn.autoretry(lambda channel=None: channel, channel=given)()
    assert result is given and channel is given


def test_a_connection_error_revives_with_a_new_channel_and_retries(conn: Any) -> None:
    channels: list[Any] = []

    def flaky(channel: Any = None) -> str:
        channels.append(channel)
        if len(channels) == 1:
            raise conn.recoverable_connection_errors[0]("connection lost")
        return "sent"

    result, channel = conn.autoretry(flaky, max_retries=2, interval_start=0,
                                     interval_step=0)()
    assert result == "sent"
    assert len(channels) == 2 and channels[1] is channel and channels[0] is not channel


def test_the_retry_limit_still_applies(conn: Any) -> None:
    def broken(channel: Any = None) -> None:
        raise conn.recoverable_connection_errors[0]("down for good")

    with pytest.raises(kombu.exceptions.OperationalError):
        conn.autoretry(broken, max_retries=1, interval_start=0, interval_step=0)()


def test_no_class_is_created_per_call(conn: Any) -> None:
    revived: list[Any] = []
    real_ensure = conn.ensure

    def spying_ensure(obj: Any, fun: Any, **options: Any) -> Any:
        revived.append(obj)
        return real_ensure(obj, fun, **options)

    conn.ensure = spying_ensure
    for _ in range(3):
        conn.autoretry(lambda channel=None: None)()
    assert len({type(obj) for obj in revived}) == 1
    assert type(revived[0]) is kombu_revival._Revival
