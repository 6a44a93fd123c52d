"""The bounded pool the conductor calls computes from: at most ``size`` calls at once.

Built once by the conductor process (``ConductorState``, ``[image_cache]
precache_concurrency`` workers) and shared by all its pre-cache jobs, so the limit holds
across jobs. Its :attr:`HostCallPool.stopping` event tells a job waiting for its host calls
that the conductor is stopping.

Queued work comes out by priority, then in the order it was queued: a host of a job of
higher priority (:mod:`fleetcache.common.job_terms`, ``priority``) that waits for a worker is
called before any waiting host of a job of lower priority, and equal priorities are first in,
first out. The order lives in a heap under the pool's lock; the workers block on a
``SimpleQueue`` of tokens, one per queued item, and each token makes its worker take the first
item of the heap at that moment::

    pool = HostCallPool(2)
    pool.run(caller.call_host, position, plan, priority=80)   # before any queued 50
    pool.shutdown()

NOTE: neither ready-made pool fits. futurist's ``ThreadPoolExecutor`` (3.5) starts a new
thread on every submit until it is full, even when workers idle (``_maybe_spin_up``), and its
workers never exit: a server that has handled k calls keeps min(k, size) threads, each waking
every second. Both it and the standard library's pool join their workers at interpreter exit,
so a conductor stopping while a compute downloads would hang until that call ends (up to
``long_rpc_timeout``). This pool starts a worker only when no idle one can take the work (the
standard library's rule), and its workers are daemon threads that nobody joins at exit: a
stopping conductor leaves at once, and the next one takes the job over (:mod:`~.takeover`).
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from fleetcache.common import job_terms

LOG = logging.getLogger(__name__)

#: Queued work: its future (``None`` from :meth:`HostCallPool.run`), the function and its
#: arguments.
_Item = tuple[concurrent.futures.Future[Any] | None, Callable[..., Any], tuple[Any, ...],
              dict[str, Any]]
#: An item in the heap: minus its priority (the highest first), then its sequence number
#: (unique, so that two items are never compared).
_Entry = tuple[int, int, _Item]
#: What wakes a worker: take the heap's first item (``True``), or exit (``None``).
_Token = bool | None


class HostCallPool(concurrent.futures.Executor):
    """A ``concurrent.futures`` executor of at most ``size`` daemon worker threads."""

    def __init__(self, size: int, name: str = "precache") -> None:
        if size < 1:
            raise ValueError("a pool needs at least one worker")
        self.size = size
        self.name = name
        self._heap: list[_Entry] = []
        self._sequence = itertools.count()
        self._tokens: queue.SimpleQueue[_Token] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._shutdown = False
        #: Set by :meth:`shutdown`: callers waiting for this pool's work can give up.
        self.stopping = threading.Event()

    @property
    def threads(self) -> int:
        """Worker threads started so far (never more than ``size``)."""
        return len(self._threads)

    @property
    def queued(self) -> int:
        """Work waiting for a worker."""
        with self._lock:
            return len(self._heap)

    def submit(self, fn: Callable[..., Any], /, *args: Any,
               **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Queue ``fn(*args, **kwargs)`` at the default priority (every keyword argument is
        ``fn``'s, as ``Executor.submit`` promises). :raises RuntimeError: after
        :meth:`shutdown`."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._put((future, fn, args, kwargs), job_terms.DEFAULT_PRIORITY)
        return future

    def run(self, fn: Callable[..., None], /, *args: Any,
            priority: int = job_terms.DEFAULT_PRIORITY) -> None:
        """Queue ``fn(*args)`` without a future, for work that reports its own outcome (a
        pre-cache host call); should it raise all the same, the error is logged.

        :param priority: its job's priority: it starts before every queued item of a lower
            one, and after those of its own priority queued before it.

        NOTE: a ``Future`` per host (its ``Condition`` and lock) showed in the conductor's GIL
        samples in ``bench/fanout.py --hosts 1000 --concurrency 64`` (py-spy), for a result
        the job never read (docs/performance.md, "The pre-cache job's own CPU per host").

        :raises RuntimeError: after :meth:`shutdown`.
        """
        self._put((None, fn, args, {}), priority)

    def _put(self, item: _Item, priority: int) -> None:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            heapq.heappush(self._heap, (-priority, next(self._sequence), item))
            self._tokens.put(True)
            if not self._idle.acquire(blocking=False) and len(self._threads) < self.size:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"{self.name}-{len(self._threads)}")
                self._threads.append(thread)
                thread.start()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking work; ``cancel_futures`` drops what has not started yet."""
        with self._lock:
            self._shutdown = True
            self.stopping.set()
            threads = list(self._threads)
        if cancel_futures:
            with self._lock:
                dropped, self._heap = self._heap, []
            for _, _, (future, *_) in dropped:
                if future is not None and future.cancel():
                    # Settles it for concurrent.futures.wait(), which a bare cancel() does not.
                    future.set_running_or_notify_cancel()
        # After every token of queued work: the workers finish what is queued, then exit.
        for _ in threads:
            self._tokens.put(None)
        if wait:
            for thread in threads:
                thread.join()

    def _work(self) -> None:
        while True:
            if self._tokens.get() is None:
                return
            with self._lock:
                if not self._heap:  # dropped by shutdown(cancel_futures=True)
                    continue
                item = heapq.heappop(self._heap)[2]
            future, fn, args, kwargs = item
            self._run_item(future, fn, args, kwargs)
            del item, future, fn, args, kwargs
            self._idle.release()

    def _run_item(self, future: concurrent.futures.Future[Any] | None, fn: Callable[..., Any],
                  args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if future is None:
            try:
                fn(*args, **kwargs)
            except Exception:
                LOG.exception("Unexpected error in %s worker", self.name)
        elif future.set_running_or_notify_cancel():
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)
