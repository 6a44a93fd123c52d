"""A stopped ``time.monotonic`` for tests (the ``clock`` fixture of this folder's conftest)."""

from __future__ import annotations


class Clock:
    """``time.monotonic`` standing still until a test moves ``now``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
