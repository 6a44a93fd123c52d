"""When a service counts as up: its last heartbeat is younger than ``service_down_time``."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from fleetcache.common.db.models import utcnow


def service_is_up(
    service: Mapping[str, Any], service_down_time: int, now: datetime.datetime | None = None
) -> bool:
    """:returns: False when forced down or silent for longer than ``service_down_time``."""
    if service["forced_down"] or service["last_seen_up"] is None:
        return False
    now = now or utcnow()
    return bool((now - service["last_seen_up"]).total_seconds() <= service_down_time)
