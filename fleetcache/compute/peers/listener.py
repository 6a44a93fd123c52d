"""The peer image server's listener: connections accepted by one thread, their request heads
read at the door by another, each whole request then served by a bounded pool of workers.

A compute serves peers beside its own work, so what the server may take of it is fixed in
advance: a pool of ``workers`` threads, never one more. A worker is given a connection only
once its request head has arrived whole (and, with TLS, its handshake ended): a client that
connects and sends nothing, or trickles its bytes, waits at the door (:class:`_Door`, one
thread polling every such connection, each without blocking) and holds no worker, until
``header_timeout`` seconds after it connected close it. Otherwise a few idle connections
from anyone who can reach the port would hold every worker and have every fleet member
refused. At most :data:`MAX_AT_DOOR` connections wait there; one more closes the oldest (a
fleet member sends its request at once, so it is never the oldest for long).

A request no worker is free for is not queued (its client would wait on a host already at
its limit, when another source may be free): the door hands it to
:meth:`ConnectionHandler.overloaded`, which must return within a bounded time, then closes
it. A TLS connection is answered the same way, its handshake having ended at the door.

On stop, :meth:`BoundedListener.abort_all` cuts the connections under way rather than wait
for their uploads (their receivers resume from their next source) and closes those at the
door.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import logging
import selectors
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from fleetcache.compute.peers.http_wire import MAX_HEAD, head_ended

LOG = logging.getLogger(__name__)

#: Connections waiting at the door for their request heads, at most: each costs a descriptor
#: and a few KiB, no thread.
MAX_AT_DOOR = 256
#: Bytes read from a connection at the door per read.
_READ = 4096


class ConnectionHandler(Protocol):
    """What the listener asks of the server (:class:`~.server.PeerServer`)."""

    def wrap(self, sock: socket.socket) -> socket.socket:
        """``sock`` as it is served (a TLS socket whose handshake has not started, or ``sock``
        itself); from then on only the socket returned is shut down and closed."""

    def refused_handshake(self, remote: str, exc: ssl.SSLError) -> None:
        """A client from ``remote`` failed the TLS handshake (its certificate or protocol),
        at the door."""

    def overloaded(self, sock: socket.socket) -> None:
        """Refuse ``sock``, whose request head arrived whole, no worker being free; called at
        the door, so it must return within a bounded time. The listener closes ``sock``."""

    def serve_connection(self, sock: socket.socket, remote: str, head: bytes) -> None:
        """Answer the request whose head (all that was read of ``sock``: the head, unless it
        is larger than :data:`~.http_wire.MAX_HEAD`) is ``head``, from address ``remote``,
        in a worker. The listener closes ``sock`` after, and logs what it raises."""


class BoundedListener(socketserver.TCPServer):
    """Accepts connections, reads their request heads at the door, and hands each whole
    request to a bounded pool of workers.

    :param address: ``(host, port)`` to listen on (an IPv6 host listens on IPv6).
    :param handler: serves and refuses the connections.
    :param workers: the most requests served at once.
    :param header_timeout: seconds a connection has, from its acceptance, to end its TLS
        handshake and send its whole request head.
    :raises OSError: the address cannot be bound.
    :ivar pool: the workers (shut down by the server's ``stop``).
    :ivar sockets: connections a worker is serving now.
    """

    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: ConnectionHandler,
                 workers: int, header_timeout: float) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.handler = handler
        self.pool = concurrent.futures.ThreadPoolExecutor(workers, "peer-server")
        self.free = threading.BoundedSemaphore(workers)
        self.sockets: set[socket.socket] = set()
        self._active_lock = threading.Lock()
        #: Set by :meth:`abort_all`: a connection a worker takes up after it is not served.
        self._aborted = False
        self.door = _Door(handler, header_timeout, self._hand_over)
        try:
            super().__init__(address, socketserver.BaseRequestHandler)
        except BaseException:  # TCPServer's server_close, which closes it, misses some
            self.door.close()
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        self.door.admit(request, client_address[0])

    def _hand_over(self, sock: socket.socket, remote: str, head: bytes) -> None:
        """At the door: ``sock``'s request to a free worker, or refused at once."""
        if not self.free.acquire(blocking=False):
            try:
                self.handler.overloaded(sock)
            finally:
                self.shutdown_request(sock)
            return
        self.pool.submit(self._work, sock, remote, head)

    def _work(self, sock: socket.socket, remote: str, head: bytes) -> None:
        try:
            with self._active_lock:
                if self._aborted:
                    return
                self.sockets.add(sock)
            self.handler.serve_connection(sock, remote, head)
        except Exception:
            LOG.exception("Peer request from %s failed", remote)
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

    def server_close(self) -> None:
        super().server_close()
        self.door.close()

    def abort_all(self) -> None:
        """End every connection under way, and any a worker takes up from now on. A worker
        waiting for a download's bytes does not touch its socket: its handler ends that wait
        (:meth:`~fleetcache.compute.peers.server.PeerServer.stop`)."""
        self.door.close()
        with self._active_lock:
            self._aborted = True
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    # The TCP connection itself: a TLS socket's own ``shutdown`` would drop
                    # its TLS state under the worker still sending on it.
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)


@dataclasses.dataclass(eq=False)
class _Guest:
    """A connection at the door: what it sent so far, and until when it may."""

    sock: socket.socket
    remote: str
    deadline: float
    head: bytearray = dataclasses.field(default_factory=bytearray)
    shaken: bool = False


class _Door:
    """One thread that reads the request heads of accepted connections without blocking on
    any (TLS handshakes included), and hands each whole one on; a connection whose head is
    not whole ``header_timeout`` seconds after it was accepted is closed unanswered."""

    def __init__(self, handler: ConnectionHandler, header_timeout: float,
                 hand_over: Callable[[socket.socket, str, bytes], None]) -> None:
        self.handler = handler
        self.header_timeout = header_timeout
        self.hand_over = hand_over
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)  # a full pair already has a wake-up pending
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._lock = threading.Lock()
        self._arrived: list[_Guest] = []
        self._guests: dict[socket.socket, _Guest] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="peer-server-door",
                                        daemon=True)
        self._thread.start()

    @property
    def waiting(self) -> int:
        """Connections at the door now."""
        with self._lock:
            return len(self._guests) + len(self._arrived)

    def admit(self, sock: socket.socket, remote: str) -> None:
        """Let ``sock``, just accepted from ``remote``, wait at the door (the accepting
        thread: never blocks)."""
        deadline = time.monotonic() + self.header_timeout
        with self._lock:
            if self._closed:
                _close(sock)
                return
            self._arrived.append(_Guest(sock, remote, deadline))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def close(self) -> None:
        """Close every connection at the door and stop its thread (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        try:
            while not self._closed:
                for key, _ in self._selector.select(self._timeout()):
                    if key.fileobj is self._wake_r:
                        self._let_in()
                    else:
                        self._read(key.data)
                self._expire()
        except Exception:  # never expected: then no connection may be left hanging
            LOG.exception("The peer image server's door failed")
        finally:
            self._shut()

    def _timeout(self) -> float | None:
        if not self._guests:
            return None
        soonest = min(g.deadline for g in self._guests.values())
        return max(soonest - time.monotonic(), 0.0)

    def _let_in(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(4096):
                pass
        with self._lock:
            arrived, self._arrived = self._arrived, []
        for guest in arrived:
            if len(self._guests) >= MAX_AT_DOOR:
                self._leave(min(self._guests.values(), key=lambda g: g.deadline))
            try:
                guest.sock.setblocking(False)
                guest.sock = self.handler.wrap(guest.sock)
                guest.shaken = not isinstance(guest.sock, ssl.SSLSocket)
                self._selector.register(guest.sock, selectors.EVENT_READ, guest)
            except (OSError, ValueError):  # a connection gone already
                _close(guest.sock)
                continue
            self._guests[guest.sock] = guest
            self._read(guest)  # what came with it (a client that sent at once)

    def _read(self, guest: _Guest) -> None:
        """Go on with ``guest``'s handshake and head as far as its bytes allow."""
        sock = guest.sock
        try:
            if not guest.shaken:
                assert isinstance(sock, ssl.SSLSocket)
                sock.do_handshake()
                guest.shaken = True
            while not head_ended(guest.head) and len(guest.head) <= MAX_HEAD:
                got = sock.recv(_READ)
                if not got:
                    self._leave(guest)
                    return
                guest.head += got
        except ssl.SSLWantWriteError:
            self._selector.modify(sock, selectors.EVENT_WRITE, guest)
            return
        except (ssl.SSLWantReadError, BlockingIOError):
            self._selector.modify(sock, selectors.EVENT_READ, guest)
            return
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
            self._leave(guest)  # it left, as without TLS: nothing to count
            return
        except ssl.SSLError as exc:
            if not guest.shaken:
                self.handler.refused_handshake(guest.remote, exc)
            self._leave(guest)
            return
        except OSError:  # a reset
            self._leave(guest)
            return
        self._forget(guest)
        try:
            sock.setblocking(True)
        except OSError:
            _close(sock)
            return
        self.hand_over(sock, guest.remote, bytes(guest.head))

    def _expire(self) -> None:
        now = time.monotonic()
        for guest in [g for g in self._guests.values() if g.deadline <= now]:
            self._leave(guest)

    def _forget(self, guest: _Guest) -> None:
        self._guests.pop(guest.sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(guest.sock)

    def _leave(self, guest: _Guest) -> None:
        """Close ``guest``'s connection unanswered."""
        self._forget(guest)
        _close(guest.sock)

    def _shut(self) -> None:
        with self._lock:
            self._closed = True
            arrived, self._arrived = self._arrived, []
        for guest in [*self._guests.values(), *arrived]:
            self._leave(guest)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
