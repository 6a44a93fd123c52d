"""Tests of fleetcache.common.servicegroup: when a service counts as up."""

from __future__ import annotations

import datetime
from typing import Any

from fleetcache.common.db.services import ServiceDict
from fleetcache.common.servicegroup import service_is_up

NOW = datetime.datetime(2026, 11, 21, 12, 0, 0)


def _service(last_seen_up: datetime.datetime | None, **kw: Any) -> ServiceDict:
    values: dict[str, Any] = dict(
        id=1, uuid="u", host="h", binary="fleetcache-compute", topic="compute", cell=None,
        disabled=False, disabled_reason=None, forced_down=False, last_seen_up=last_seen_up,
        report_count=1, capabilities={}, created_at=NOW, updated_at=None,
    )
    values.update(kw)
    return ServiceDict(**values)  # type: ignore[typeddict-item]


def test_recent_heartbeat_is_up() -> None:
    assert service_is_up(_service(NOW - datetime.timedelta(seconds=5)), 60, now=NOW)


def test_heartbeat_exactly_service_down_time_old_is_still_up() -> None:
    assert service_is_up(_service(NOW - datetime.timedelta(seconds=60)), 60, now=NOW)


def test_heartbeat_older_than_service_down_time_is_down() -> None:
    assert not service_is_up(_service(NOW - datetime.timedelta(seconds=61)), 60, now=NOW)


def test_never_seen_is_down() -> None:
    assert not service_is_up(_service(None), 60, now=NOW)


def test_forced_down_is_down_despite_a_fresh_heartbeat() -> None:
    assert not service_is_up(_service(NOW, forced_down=True), 60, now=NOW)


def test_disabled_does_not_mean_down() -> None:
    assert service_is_up(_service(NOW, disabled=True), 60, now=NOW)


def test_default_now_is_the_current_time() -> None:
    from fleetcache.common.db.models import utcnow

    assert service_is_up(_service(utcnow()), 60)
    assert not service_is_up(_service(utcnow() - datetime.timedelta(seconds=120)), 60)
