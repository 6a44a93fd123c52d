"""Polling until something holds: the one wait every test tree shares (unit, functional,
integration), so that a timeout reads the same everywhere and a test never sleeps a fixed
time in the hope that something happened.

    job = wait_for(lambda: finished(job_id), "the job to end", 60, guard=dep.check_running)
    took = seconds_until(lambda: not dep.is_up(host), "the compute to turn down", 10)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T | None], what: str, timeout: float = 10, *,
             guard: Callable[[], None] | None = None, interval: float = 0.1) -> T:
    """Call ``condition`` every ``interval`` seconds until it returns a true value.

    The condition is asked once more after the deadline, so a slow last poll still counts.

    :param condition: returns a false value while the wait goes on; its first true value
        ends the wait (a bool, or the thing waited for: a job, a list of files).
    :param what: what is awaited, for the failure message ("the job to end").
    :param timeout: seconds before the test fails.
    :param guard: called before each poll; raises when waiting is pointless (a daemon
        exited), so the failure names the cause instead of a timeout.
    :param interval: seconds between polls.
    :returns: the condition's first true value.
    :raises AssertionError: when the condition stayed false for ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        if guard is not None:
            guard()
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(interval)


def seconds_until(condition: Callable[[], object], what: str, timeout: float = 10, *,
                  guard: Callable[[], None] | None = None, interval: float = 0.1) -> float:
    """:func:`wait_for`, for a test that judges how long the wait took (a compute seen down
    within ``service_down_time``). :returns: the seconds until ``condition`` held."""
    began = time.monotonic()
    wait_for(condition, what, timeout, guard=guard, interval=interval)
    return time.monotonic() - began
