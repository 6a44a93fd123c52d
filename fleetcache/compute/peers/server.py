"""The compute's image server for peers: :class:`PeerServer`, read-only, one route.

::

    GET|HEAD /v1/images/<uuid>      Authorization: FleetcachePeer <claims>.<hmac>
                                    Range: bytes=<first>-[<last>]   (optional, one range)

This module decides who gets which bytes and how fast; the rest of the server sits beside it,
each part small enough to check on its own: the HTTP it speaks (:mod:`~.http_wire`), the
threads it may take of the compute (:mod:`~.listener`), and the file a request may read
(:mod:`~.image_files`).

What it refuses, and how (every refusal is counted by reason, :attr:`PeerServer.denied`):

* anything but the route, or an id that is not a UUID: 404 (no path of the request is ever
  joined to a directory; the id is mapped through the cache index,
  :meth:`~fleetcache.compute.imagecache.cache.ImageCache.servable`);
* a missing, malformed, forged or expired token, or one of a job this host does not serve:
  401; a valid token for another server, image or address, or for an image not granted to its
  job here: 403 (:mod:`fleetcache.common.peer_tokens`, :mod:`~.grants`);
* an image not cached, converted (not the image's own bytes) or not a regular file (the base
  is opened with ``O_NOFOLLOW``, then ``fstat``-ed): 404 naming the image in
  :data:`~.http_wire.NOT_CACHED_HEADER` (the route's 404 does not), unless it is being
  downloaded here (below);
* several ranges, or one it cannot satisfy: 416;
* more than ``[image_cache] peer_max_uploads`` uploads at once: 503 with ``Retry-After``.

Requests are served by a bounded pool (``peer_max_uploads`` plus a few spare workers for
refusals, :mod:`~.listener`), each once its head has arrived whole: a connection waits for
that at the listener's door, which holds no worker, for ``header_timeout`` seconds at most (a
deadline, not a per-read timeout), so clients that connect and send nothing, or trickle
their bytes, keep no fleet member from being served. A request beyond the pool gets a 503 at
once. Every send must progress within ``send_timeout`` (``peer_stall_timeout``: the
receiver itself leaves after that). Uploads share ``[image_cache]
max_upload_bytes_per_second`` (a :class:`~fleetcache.compute.imagecache.bandwidth.
TokenBucket`); without it the file is sent with ``sendfile``. One request per connection
(``Connection: close``).

**Mutual TLS** (``[image_cache] peer_ssl_*``, :mod:`~.tls`): each accepted connection's
handshake runs at the door, without blocking, and must end within the same
``header_timeout`` deadline as the request head that follows (a client that connects and
sends nothing, or trickles its handshake, is cut then). A client without a certificate
signed by the peers' CA (none, self-signed, another CA's) or that speaks plain HTTP fails
the handshake: the connection is closed with no HTTP answer, and the refusal is counted as
``tls``. The credential is still required on top. Uploads are then encrypted in this
process (no ``sendfile``).

**Cut-through** (``[image_cache] peer_cut_through``): a granted image that is not cached but
is being downloaded here (:mod:`~.inflight`; or is about to be: ``serve_images`` accepted it)
is sent from the download's temporary file, opened once as the base is (:mod:`~.image_files`):
the bytes written, then each new byte as it is written, up to the size the image service gave
(the ``Content-Length``, or ``Content-Range``'s total). A ``Range`` within or beyond the
written part is served the same way. A request for bytes not written yet waits for them (or
for an announced download to start) at most half of ``send_timeout``, then is answered 503
``not_yet`` with ``Retry-After: 1``: the receiver, whose read timeout is
``peer_stall_timeout``, asks again instead of timing out and giving this host up (a chain
behind a stalled host waits in turn). An announced download that has not started
``send_timeout`` after its announcement is answered 404 (one handed back to the conductor
after its peers failed: ``peer_wait_timeout`` after that, since the conductor's next call for
it may first wait for a download slot). When the download fails, its file
goes before the end, or it makes no progress for ``send_timeout`` seconds, the connection is
closed short: the receiver resumes from its next source, or asks again (it got bytes). Once
published, new requests are served from the base.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
import socket
import ssl
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from oslo_config import cfg

from fleetcache.common import exception, peer_tokens
from fleetcache.compute.imagecache.bandwidth import TokenBucket
from fleetcache.compute.peers import tls
from fleetcache.compute.peers.grants import ServeGrants
from fleetcache.compute.peers.http_wire import (
    NOT_CACHED_HEADER,
    RangeNotSatisfiable,
    Refused,
    parse_head,
    parse_range,
    send_head,
)
from fleetcache.compute.peers.image_files import DownloadNotStarted, open_image
from fleetcache.compute.peers.inflight import DownloadEnded, GrowingFile
from fleetcache.compute.peers.listener import BoundedListener

if TYPE_CHECKING:
    from fleetcache.compute.imagecache.cache import ImageCache

LOG = logging.getLogger(__name__)

#: Seconds a client has to complete its TLS handshake (with TLS) and send its whole request
#: head.
HEADER_TIMEOUT = 10.0
#: Workers beyond ``peer_max_uploads``, so that refusals (401, 404, 503) are answered while
#: every upload slot is taken.
SPARE_WORKERS = 4
#: Seconds the listener's door may spend answering a request no worker is free for.
OVERFLOW_ANSWER = 0.1
#: Seconds a client refused for want of an upload slot, or asking for bytes a download under
#: way has not written yet, is told to wait (``Retry-After``): receivers ask again after it
#: (:mod:`~.source`), and a slot or the bytes may come any moment (with 5 s, the 32 hosts of
#: a group behind a lying peer took 50.6 s to re-form their chain; docs/performance.md).
RETRY_AFTER = 1
#: Bytes read and sent per step when the upload is throttled.
SEND_CHUNK = 256 * 1024
_ROUTE = re.compile(r"/v1/images/([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                    r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12})")


class PeerMetrics(Protocol):
    """What the server reports (:class:`~fleetcache.compute.metrics.ComputeMetrics`)."""

    def record_peer_request(self, code: int) -> None: ...

    def record_peer_denied(self, reason: str) -> None: ...

    def record_peer_upload(self, sent: int, in_flight: int) -> None: ...


class PeerServer:
    """The image server of one compute (see the module docstring).

    :param metrics: the compute's Prometheus metrics, or None.
    :param header_timeout: seconds to receive a request head.
    :param send_timeout: seconds a send may make no progress (default: ``[image_cache]
        peer_stall_timeout``).
    :raises InvalidConfiguration: ``[image_cache] peer_ssl_*`` set in part, or its files
        cannot be loaded.
    :ivar denied: refused requests by reason (:data:`fleetcache.common.peer_tokens.REASONS`;
        ``tls``: a failed handshake).
    :ivar responses: answered requests by status code.
    :ivar ssl_context: the server's TLS context (``[image_cache] peer_ssl_*``), or None:
        plain HTTP.
    """

    def __init__(self, conf: cfg.ConfigOpts, cache: ImageCache, grants: ServeGrants,
                 metrics: PeerMetrics | None = None, *,
                 header_timeout: float = HEADER_TIMEOUT,
                 send_timeout: float | None = None) -> None:
        opts = conf.image_cache
        self.conf = conf
        self.cache = cache
        self.grants = grants
        self.metrics = metrics
        self.host: str = conf.host
        self.address: str = opts.peer_listen_address or conf.my_ip
        self.port: int = opts.peer_listen_port
        self.header_timeout = header_timeout
        self.send_timeout: float = send_timeout or opts.peer_stall_timeout
        #: How long a request for bytes a download under way has not written yet waits for
        #: them before a 503 ``not_yet``: within the receiver's read timeout
        #: (``peer_stall_timeout``), so that it hears the 503 rather than timing out.
        self.first_byte_wait: float = self.send_timeout / 2
        #: How long a download handed back to the conductor is waited for: as long as its
        #: receivers wait for a peer (``peer_wait_timeout``), never less than one announced.
        self.resume_timeout = max(self.send_timeout, float(opts.peer_wait_timeout))
        self.max_uploads: int = opts.peer_max_uploads
        self.cut_through: bool = opts.peer_cut_through
        files = tls.load(conf)
        self.ssl_context = tls.server_context(files) if files is not None else None
        self.denied: collections.Counter[str] = collections.Counter()
        self.responses: collections.Counter[int] = collections.Counter()
        self._uploads = threading.BoundedSemaphore(self.max_uploads)
        self._in_flight = 0
        self._lock = threading.Lock()
        self._listener: BoundedListener | None = None
        self._thread: threading.Thread | None = None
        #: Set by :meth:`stop`: requests waiting for a download's bytes, or for the upload
        #: cap's tokens, end at once.
        self._stopping = threading.Event()
        rate: int = opts.max_upload_bytes_per_second
        self.bucket = TokenBucket(rate, sleep=self._stopping.wait) if rate else None

    @property
    def url(self) -> str:
        """What this compute advertises to the conductor: ``http://<addr>:<port>``, or
        ``https://`` with TLS."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        port = self._listener.server_address[1] if self._listener else self.port
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{host}:{port}"

    @property
    def bound_address(self) -> str:
        """The IP address the server is bound to once started (``address`` before): a host
        name in ``peer_listen_address`` resolved as the kernel bound it. The conductor names
        it in credentials for this host's own requests (``peer_check_source_address``),
        which come from it (:mod:`~.source`): the source address a server sees."""
        listener = self._listener
        return str(listener.server_address[0]) if listener is not None else self.address

    @property
    def active_connections(self) -> int:
        """Connections a worker is serving now (at most ``peer_max_uploads`` +
        :data:`SPARE_WORKERS`)."""
        return self._listener.active if self._listener is not None else 0

    @property
    def waiting_connections(self) -> int:
        """Connections waiting for their handshake or request head, which no worker serves
        yet (at most :data:`~.listener.MAX_AT_DOOR`)."""
        return self._listener.door.waiting if self._listener is not None else 0

    def start(self) -> None:
        """Listen on ``peer_listen_address`` (or ``my_ip``) and ``peer_listen_port``.

        :raises InvalidConfiguration: the address cannot be bound.
        """
        self._stopping.clear()  # started again after a stop
        try:
            self._listener = BoundedListener((self.address, self.port), self,
                                             self.max_uploads + SPARE_WORKERS,
                                             self.header_timeout)
        except OSError as exc:
            raise exception.InvalidConfiguration(
                reason=f"the peer image server cannot listen on {self.address}:{self.port} "
                f"([image_cache] peer_listen_address, peer_listen_port): {exc}") from exc
        self._thread = threading.Thread(target=self._listener.serve_forever,
                                        kwargs={"poll_interval": 0.2},
                                        name="peer-server", daemon=True)
        self._thread.start()
        LOG.info("Peer image server listening on %s", self.url)

    def stop(self) -> None:
        """Stop accepting, end the connections under way (their receivers go on from their
        next source), and wait for their workers."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        self._stopping.set()
        listener.shutdown()
        listener.server_close()
        listener.abort_all()
        listener.pool.shutdown(wait=True)
        if self._thread is not None:
            self._thread.join()

    def overloaded(self, sock: socket.socket) -> None:
        """Answer 503 on a request no worker is free for, at the listener's door, so within
        a bounded time (the answer is tiny: ``OVERFLOW_ANSWER`` seconds at most). Its head was
        read whole, so closing the socket after leaves no unread data that would reset the
        connection before the client reads the answer."""
        with contextlib.suppress(OSError):
            sock.settimeout(OVERFLOW_ANSWER)
            self._respond(sock, 503, {"Retry-After": str(RETRY_AFTER)})

    def wrap(self, sock: socket.socket) -> socket.socket:
        """``sock`` as it is served: a TLS socket whose handshake has not started yet (the
        listener's door runs it under the header deadline), or ``sock`` itself without
        TLS."""
        if self.ssl_context is None:
            return sock
        return self.ssl_context.wrap_socket(sock, server_side=True,
                                            do_handshake_on_connect=False)

    def refused_handshake(self, remote: str, exc: ssl.SSLError) -> None:
        """Count a TLS handshake that failed on the peer's certificate or protocol (a client
        that leaves or is too slow is not counted, as without TLS)."""
        self._count_denial("tls", peer_tokens.canonical_address(remote), exc)

    def serve_connection(self, sock: socket.socket, remote: str, head: bytes) -> None:
        """Answer the one request of ``sock`` (from :meth:`wrap`), whose head is ``head``,
        from ``remote``."""
        sock.settimeout(self.send_timeout)  # every send progresses within it, or ends
        try:
            method, target, headers = parse_head(head)
        except Refused as exc:
            self._answer(sock, exc)
            return
        # The receiver's read timeout runs from its request: whatever this request waits
        # for (a download to start, then its first bytes), it is answered by then.
        answer_by = time.monotonic() + self.first_byte_wait
        try:
            fd, image_id, growing = self._authorize(
                method, target, headers, peer_tokens.canonical_address(remote), answer_by)
        except Refused as exc:
            self._answer(sock, exc)
            return
        with os.fdopen(fd, "rb") as f:
            try:
                self._send_file(sock, f, method, headers.get("range"), image_id, growing,
                                answer_by)
            except OSError as exc:  # the client left
                LOG.info("Peer request for %s from %s ended: %s", image_id, remote, exc)

    def _authorize(self, method: str, target: str, headers: dict[str, str],
                   remote: str, answer_by: float) -> tuple[int, str, GrowingFile | None]:
        """The open file (the base, or a download under way: its :class:`GrowingFile`) and
        image id the request may read, waiting until ``answer_by`` (monotonic) at most for
        an announced download to start. :raises Refused:"""
        if method not in ("GET", "HEAD"):
            raise Refused(405, "method", {"Allow": "GET, HEAD"})
        match = _ROUTE.fullmatch(target)
        if match is None:
            raise Refused(404, "route")
        image_id = match.group(1)
        try:
            claims = peer_tokens.verify(
                headers.get("authorization"), self.grants.key_for, server=self.host,
                image_id=image_id, remote_ip=remote,
                check_ip=self.conf.image_cache.peer_check_source_address)
            if not self.grants.allows(claims.job, image_id):
                raise peer_tokens.PeerDenied("not_granted", f"{image_id} for {claims.job}")
            fd, growing = open_image(self.cache, image_id, cut_through=self.cut_through,
                                     answer_by=answer_by, send_timeout=self.send_timeout,
                                     resume_timeout=self.resume_timeout,
                                     stopping=self._stopping)
            if fd is None:
                raise peer_tokens.PeerDenied("not_cached", image_id)
        except peer_tokens.PeerDenied as exc:
            self._count_denial(exc.reason, remote, exc)
            status = (401 if exc.reason in peer_tokens.UNAUTHENTICATED
                      else 404 if exc.reason == "not_cached" else 403)
            extra = ({"WWW-Authenticate": peer_tokens.SCHEME} if status == 401
                     else {NOT_CACHED_HEADER: image_id} if status == 404 else {})
            raise Refused(status, exc.reason, extra) from exc
        except DownloadNotStarted as exc:
            raise Refused(503, "not_yet", {"Retry-After": str(RETRY_AFTER)}) from exc
        return fd, image_id, growing

    def _send_file(self, sock: socket.socket, f: Any, method: str, range_: str | None,
                   image_id: str, growing: GrowingFile | None = None,
                   answer_by: float = 0.0) -> None:
        """Answer with ``f`` (``growing``: a download under way, whose first bytes are waited
        for until ``answer_by``, monotonic, at most)."""
        size = growing.size if growing is not None else os.fstat(f.fileno()).st_size
        try:
            span = parse_range(range_, size)
        except RangeNotSatisfiable as exc:
            self._answer(sock, Refused(416, str(exc), {"Content-Range": f"bytes */{size}"}))
            return
        first, last = span if span is not None else (0, size - 1)
        headers = {"Content-Length": str(last - first + 1), "Accept-Ranges": "bytes"}
        if span is not None:
            headers["Content-Range"] = f"bytes {first}-{last}/{size}"
        status = 206 if span is not None else 200
        if method == "HEAD":
            self._respond(sock, status, headers)
            return
        if growing is not None and not growing.holds_beyond(
                first, max(answer_by - time.monotonic(), 0.0)):
            # Nothing to send yet (this host's own download has not reached ``first``,
            # stalled maybe): a stream that ended empty would lose this host as the
            # receiver's source, so it is told to ask again.
            self._answer(sock, Refused(503, "not_yet", {"Retry-After": str(RETRY_AFTER)}))
            return
        if not self._uploads.acquire(blocking=False):
            self._answer(sock, Refused(503, "busy", {"Retry-After": str(RETRY_AFTER)}))
            return
        try:
            self._upload(sock, f, status, headers, first, last - first + 1, image_id, growing)
        finally:
            self._uploads.release()

    def _upload(self, sock: socket.socket, f: Any, status: int, headers: dict[str, str],
                offset: int, count: int, image_id: str,
                growing: GrowingFile | None = None) -> None:
        with self._lock:
            self._in_flight += 1
            in_flight = self._in_flight
        if self.metrics is not None:
            self.metrics.record_peer_upload(0, in_flight)
        sent = 0
        try:
            self._respond(sock, status, headers)
            sock.settimeout(self.send_timeout)
            if growing is not None:
                while sent < count:
                    ready = min(growing.wait_beyond(offset + sent), offset + count)
                    sent += self._send_span(sock, f, offset + sent, ready - offset - sent)
            else:
                sent = self._send_span(sock, f, offset, count)
        except (OSError, DownloadEnded) as exc:
            LOG.info("Peer upload of %s stopped after %d of %d bytes: %s", image_id, sent,
                     count, exc)
        finally:
            with self._lock:
                self._in_flight -= 1
                in_flight = self._in_flight
            if self.metrics is not None:
                self.metrics.record_peer_upload(sent, in_flight)

    def _send_span(self, sock: socket.socket, f: Any, offset: int, count: int) -> int:
        """Send ``count`` bytes of ``f`` from ``offset``: :returns: the bytes sent."""
        if not count:
            return 0
        if self.bucket is None:
            return sock.sendfile(f, offset, count)
        return self._send_throttled(sock, f.fileno(), offset, count)

    def _send_throttled(self, sock: socket.socket, fd: int, offset: int, count: int) -> int:
        assert self.bucket is not None
        sent = 0
        while sent < count:
            data = os.pread(fd, min(SEND_CHUNK, count - sent), offset + sent)
            if not data:
                break
            self.bucket.take(len(data))
            if self._stopping.is_set():
                raise DownloadEnded("the image server stops")
            sock.sendall(data)
            sent += len(data)
        return sent

    def _answer(self, sock: socket.socket, refused: Refused) -> None:
        with contextlib.suppress(OSError):
            sock.settimeout(self.send_timeout)
            self._respond(sock, refused.status, {**refused.headers, "Content-Length": "0"})

    def _respond(self, sock: socket.socket, status: int, headers: dict[str, str]) -> None:
        with self._lock:
            self.responses[status] += 1
        if self.metrics is not None:
            self.metrics.record_peer_request(status)
        send_head(sock, status, headers)

    def _count_denial(self, reason: str, remote: str, exc: Exception) -> None:
        with self._lock:
            self.denied[reason] += 1
        if self.metrics is not None:
            self.metrics.record_peer_denied(reason)
        LOG.warning("Peer request from %s denied: %s", remote, exc)
