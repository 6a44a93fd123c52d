"""The bounded pool the conductor calls computes from: at most ``size`` calls at once.

Built once by the conductor process (``ConductorState``, ``[image_cache]
precache_concurrency`` workers) and shared by all its pre-cache jobs, so the limit holds
across jobs. Its :attr:`HostCallPool.stopping` event tells a job waiting for its host calls
that the conductor is stopping.

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
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

LOG = logging.getLogger(__name__)

#: Queued work: its future (``None`` from :meth:`HostCallPool.run`), the function and its
#: arguments; ``None`` tells a worker to exit.
_Item = tuple[concurrent.futures.Future[Any] | None, Callable[..., Any], tuple[Any, ...],
              dict[str, Any]] | None


class HostCallPool(concurrent.futures.Executor):
    """A ``concurrent.futures`` executor of at most ``size`` daemon worker threads."""

    def __init__(self, size: int, name: str = "precache") -> None:
        if size < 1:
            raise ValueError("a pool needs at least one worker")
        self.size = size
        self.name = name
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
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

    def submit(self, fn: Callable[..., Any], /, *args: Any,
               **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Queue ``fn(*args, **kwargs)``. :raises RuntimeError: after :meth:`shutdown`."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._put((future, fn, args, kwargs))
        return future

    def run(self, fn: Callable[..., None], /, *args: Any) -> None:
        """Queue ``fn(*args)`` without a future, for work that reports its own outcome (a
        pre-cache host call); should it raise all the same, the error is logged.

        NOTE: a ``Future`` per host (its ``Condition`` and lock) showed in the conductor's GIL
        samples in ``bench/fanout.py --hosts 1000 --concurrency 64`` (py-spy), for a result
        the job never read (docs/performance.md, "The pre-cache job's own CPU per host").

        :raises RuntimeError: after :meth:`shutdown`.
        """
        self._put((None, fn, args, {}))

    def _put(self, item: _Item) -> None:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._queue.put(item)
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
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None and item[0] is not None and item[0].cancel():
                    # Settles it for concurrent.futures.wait(), which a bare cancel() does not.
                    item[0].set_running_or_notify_cancel()
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
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
