"""A stopped ``time.monotonic`` for tests (the ``clock`` fixture of this folder's conftest)."""

from __future__ import annotations


class Clock:
    """``time.monotonic`` standing still until a test moves ``now``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SleepingClock(Clock):
    """A :class:`Clock` that a ``sleep`` moves, recording each sleep in ``slept``."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
