"""The peer image server's listener: connections accepted by one thread, served by a bounded
pool of workers.

A compute serves peers beside its own work, so what the server may take of it is fixed in
advance: a pool of ``workers`` threads, never one more. A connection no worker is free for
is not queued (its client would wait on a host already at its limit, when another source may
be free): the accepting thread hands it to :meth:`ConnectionHandler.overloaded`, which must
return within a bounded time, then closes it. Everything slow, a TLS handshake included,
happens in a worker (:meth:`ConnectionHandler.wrap` only prepares the socket).

On stop, :meth:`BoundedListener.abort_all` cuts the connections under way rather than wait
for their uploads: their receivers resume from their next source.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import socket
import socketserver
import threading
from typing import Any, Protocol

LOG = logging.getLogger(__name__)


class ConnectionHandler(Protocol):
    """What the listener asks of the server (:class:`~.server.PeerServer`)."""

    def overloaded(self, sock: socket.socket) -> None:
        """Refuse ``sock``, no worker being free; called in the accepting thread, so it must
        return within a bounded time. The listener closes ``sock`` after."""

    def wrap(self, sock: socket.socket) -> socket.socket:
        """``sock`` as the worker serves it (a TLS socket, or ``sock`` itself); from then on
        only the socket returned is shut down and closed."""

    def serve_connection(self, sock: socket.socket, remote: str) -> None:
        """Answer the one request of ``sock`` (from :meth:`wrap`), from address ``remote``,
        in a worker. The listener closes ``sock`` after, and logs what it raises."""


class BoundedListener(socketserver.TCPServer):
    """Accepts connections and hands them to a bounded pool of workers.

    :param address: ``(host, port)`` to listen on (an IPv6 host listens on IPv6).
    :param handler: serves and refuses the connections.
    :param workers: the most connections served at once.
    :raises OSError: the address cannot be bound.
    :ivar pool: the workers (shut down by the server's ``stop``).
    :ivar sockets: connections a worker is serving now.
    """

    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: ConnectionHandler,
                 workers: int) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.handler = handler
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, "peer-server")
        self.free = threading.BoundedSemaphore(workers)
        self.sockets: set[socket.socket] = set()
        self._active_lock = threading.Lock()
        #: Set by :meth:`abort_all`: a connection a worker takes up after it is not served.
        self._aborted = False
        super().__init__(address, socketserver.BaseRequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.free.acquire(blocking=False):
            self.handler.overloaded(request)
            self.shutdown_request(request)
            return
        self.pool.submit(self._work, request, client_address)

    def _work(self, request: socket.socket, client_address: Any) -> None:
        sock = request
        try:
            # NOTE: wrapping hands the descriptor to the TLS socket; from here on
            # only ``sock`` may be shut down and closed.
            sock = self.handler.wrap(request)
            with self._active_lock:
                if self._aborted:
                    return
                self.sockets.add(sock)
            self.handler.serve_connection(sock, client_address[0])
        except Exception:
            LOG.exception("Peer request from %s failed", client_address[0])
        finally:
            self.shutdown_request(sock)
            with self._active_lock:
                self.sockets.discard(sock)
            self.free.release()

    @property
    def active(self) -> int:
        """Connections a worker is serving now."""
        with self._active_lock:
            return len(self.sockets)

    def abort_all(self) -> None:
        """End every connection under way, and any a worker takes up from now on. A worker
        waiting for a download's bytes does not touch its socket: its handler ends that wait
        (:meth:`~fleetcache.compute.peers.server.PeerServer.stop`)."""
        with self._active_lock:
            self._aborted = True
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    # The TCP connection itself: a TLS socket's own ``shutdown`` would drop
                    # its TLS state under the worker still sending on it.
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
