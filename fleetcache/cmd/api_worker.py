"""The gunicorn worker of ``fleetcache-api``: ``gthread`` with a deadline on every request.

gunicorn's ``gthread`` worker waits a few seconds for a new connection's first bytes without
taking a thread, but then reads the headers and the body in a pool thread from a blocking
socket without any timeout. Four clients that sent ``Content-Length: 1000`` and 7 bytes held all
four threads of a worker until they hung up (75 s seen), and every other request waited.

:class:`DeadlineThreadWorker` gives each request ``[api] client_timeout`` seconds from the
moment a thread takes it: when they are up, :class:`ReadDeadlines` shuts the reading side of
the socket (``shutdown(SHUT_RD)``), the blocked read returns end-of-file at once, and the thread
is free again. A client cut off in its body gets 408 from ``fleetcache.api.guard``; one cut off
in its headers gets a closed connection. Writing is not affected, so a request that is slow to
*answer* still sends its response (and the connection is then not reused).
"""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from typing import Any

from gunicorn.workers.gthread import ThreadWorker  # type: ignore[import-untyped]


class ReadDeadlines:
    """Shuts the reading side of sockets whose deadline has passed, from one thread.

    One per worker process, started after the fork (threads do not survive it).
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, socket.socket] = {}
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="read-deadlines", daemon=True)
        self._thread.start()

    def arm(self, sock: socket.socket, timeout: float) -> int:
        """Cut ``sock``'s reading side in ``timeout`` seconds unless :meth:`disarm` is called."""
        token = next(self._tokens)
        with self._condition:
            self._armed[token] = sock
            heapq.heappush(self._heap, (time.monotonic() + timeout, token))
            self._condition.notify()
        return token

    def disarm(self, token: int) -> None:
        with self._condition:
            self._armed.pop(token, None)

    def expire(self, now: float) -> None:
        """Cut every socket due by ``now``."""
        due: list[socket.socket] = []
        with self._condition:
            while self._heap and self._heap[0][0] <= now:
                _, token = heapq.heappop(self._heap)
                sock = self._armed.pop(token, None)
                if sock is not None:
                    due.append(sock)
            # Disarmed tokens stay in the heap until their deadline: drop them early when the
            # heap is mostly stale, so that it stays as small as the requests in flight.
            if len(self._heap) > 2 * len(self._armed) + 64:
                self._heap = [entry for entry in self._heap if entry[1] in self._armed]
                heapq.heapify(self._heap)
        for sock in due:
            try:
                sock.shutdown(socket.SHUT_RD)
            except OSError:
                pass  # already closed by the client or by gunicorn

    def _run(self) -> None:
        while True:
            self.expire(time.monotonic())
            with self._condition:  # checked under the lock: an arm() now cannot be missed
                if not self._heap:
                    self._condition.wait()
                else:
                    wait = self._heap[0][0] - time.monotonic()
                    if wait > 0:
                        self._condition.wait(timeout=wait)


class DeadlineThreadWorker(ThreadWorker):  # type: ignore[misc]
    """``gthread`` whose request threads stop reading after ``[api] client_timeout``."""

    def init_process(self) -> None:
        self.client_timeout = float(self.app.conf.api.client_timeout)
        self.read_deadlines = ReadDeadlines()
        self.read_deadlines.start()
        super().init_process()

    def handle(self, conn: Any) -> Any:
        token = self.read_deadlines.arm(conn.sock, self.client_timeout)
        try:
            return super().handle(conn)
        finally:
            self.read_deadlines.disarm(token)
