"""Admission of the compute's long RPC calls: at most ``[compute] max_concurrent_long_calls``.

A ``cache_images`` or ``create_instance_disk`` call holds an RPC worker thread for as long as
its download and conversion take. oslo.messaging (18.x, ``rpc/dispatcher.py``) starts the
call-monitor watchdog that heartbeats to the caller only when a worker dispatches the message,
so a call queued behind ``executor_thread_pool_size`` busy workers sends nothing and its caller
raises ``MessagingTimeout`` after ``rpc_response_timeout``, although the compute is alive. The
RPC API cannot hand a reply to another thread, so the fix is admission: long calls may hold at
most ``limit`` workers (fewer than the pool), every other worker stays free to dispatch, and a
long call over the limit is refused at once with :class:`~fleetcache.common.exception.
ComputeBusy` instead of waiting in silence. ``tests/integration/test_compute_long_calls.py``
shows both sides.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from oslo_config import cfg

from fleetcache.common import exception


class LongCallSlots:
    """At most ``limit`` long calls at once; the caller of one more gets ``ComputeBusy``."""

    def __init__(self, limit: int, host: str) -> None:
        self.limit = limit
        self.host = host
        self._slots = threading.BoundedSemaphore(limit)

    @contextlib.contextmanager
    def hold(self, method: str) -> Iterator[None]:
        """Run the body in a slot.

        :raises ComputeBusy: at once, when every slot is taken.
        """
        if not self._slots.acquire(blocking=False):
            raise exception.ComputeBusy(host=self.host, limit=self.limit, method=method)
        try:
            yield
        finally:
            self._slots.release()


def limit_problem(conf: cfg.ConfigOpts) -> str | None:
    """Why :func:`effective_limit` is below ``[compute] max_concurrent_long_calls``, if it is."""
    limit = conf.compute.max_concurrent_long_calls
    workers = conf.executor_thread_pool_size
    if limit < workers:
        return None
    return (f"[compute] max_concurrent_long_calls ({limit}) is not below [DEFAULT] "
            f"executor_thread_pool_size ({workers}); {workers - 1} long calls are admitted, so "
            "that one RPC worker stays free to answer the others")


def effective_limit(conf: cfg.ConfigOpts) -> int:
    """The long calls admitted at once: ``[compute] max_concurrent_long_calls``, lowered to
    ``executor_thread_pool_size - 1`` when it is not below it, so that a configuration which
    set the pool itself (say 8, the compute's default before this limit existed) keeps
    starting, with one worker left free (:func:`limit_problem` says so).

    :raises InvalidConfiguration: when the RPC server has a single worker: any long call
        would leave no worker to answer the others.
    """
    workers: int = conf.executor_thread_pool_size
    if workers < 2:
        raise exception.InvalidConfiguration(
            reason=f"[DEFAULT] executor_thread_pool_size ({workers}) must be at least 2 on a "
            "compute: a long call holds its worker, and one must stay free to answer the rest")
    limit: int = conf.compute.max_concurrent_long_calls
    return min(limit, workers - 1)
