"""Fixtures shared by the tests of fleetcache.common."""

from __future__ import annotations

import time

import pytest

from tests.unit.common.clock import Clock


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The process's ``time.monotonic`` replaced by a :class:`Clock` for the test."""
    clock = Clock()
    monkeypatch.setattr(time, "monotonic", clock)
    return clock
