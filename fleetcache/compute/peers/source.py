"""The client of peer distribution: :class:`PeerSource` streams one image from other computes.

It is an image source for :func:`~fleetcache.compute.imagecache.download.download_checked`,
so peer bytes go through the same one-pass verification as the image service's (size,
multihash, signatures, format safety): a peer can waste bytes, never publish them. It walks
its ordered list of peers; a peer that cannot be reached, answers anything but 200/206, sends
a body of another length, or sends no byte for ``[image_cache] peer_stall_timeout`` seconds
(the socket's timeout, which bounds each wait for it) is left, and the next peer is asked for
the rest with ``Range: bytes=<written>-``. The body is read straight into the download's
buffers (:mod:`~fleetcache.image.http_into`): a failure costs at most the read that was in
flight.

A peer left is not given up at once: while any peer may still send (it sent bytes in its last
attempt, or answered 503/429: busy, or not that far in its own download yet), the list is
walked again, after the least ``Retry-After`` of those answers when no byte came, until
``[image_cache] peer_wait_timeout`` seconds pass without a byte. A peer is given up when an
attempt neither sent a byte nor asked to be retried (refused connection, a wrong size, 404):
a host that died, or lacks the image, not one that stalls. So a stalled source, and every
host of a cut-through chain behind it, waits for the bytes its group already fetched instead
of taking them from the image service again (issue 22: about one copy per group, faults
included); the image service is the way out only when no peer is left or the wait ran out.

A 404 naming the image in :data:`~.http_wire.NOT_CACHED_HEADER` says only that the peer does
not hold the image (its base was converted or aged out, or its download ended): such a peer
is :attr:`PeerSource.absent_hosts`, not :attr:`~PeerSource.failed_hosts`, so that the
conductor stops naming it for that image only, not for the whole job. Any other 404 (a
peer URL that reaches another HTTP service, or a wrong route) is a failure, unless the peer
is not known to send that header (:attr:`~fleetcache.compute.rpcapi.Peer.not_cached_header`
not set: an image server from before it, during a rolling upgrade), whose every 404 still
reads as the image's absence.

When no peer is left after some bytes arrived, and ``origin`` can start mid-image
(:meth:`~fleetcache.image.source.ImageSource.download_from`, Glance's ``Range``), the rest
comes from the origin in the same stream; otherwise :class:`PeersFailed` is raised and the
caller downloads from the origin from byte 0.

With mutual TLS (``[image_cache] peer_ssl_*``, :mod:`~.tls`) the connection presents this
host's certificate and accepts only a server certificate signed by the peers' CA for the
address it connects to; a plain ``http://`` peer is then left unasked (its credential and
bytes would travel in clear). No proxy of the environment is used (a proxy would see the
token and hide the requester's address), nor ``.netrc`` credentials.

Metadata never comes from a peer: :meth:`PeerSource.show` refuses, and ``download`` takes the
image service's ``meta``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.client
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Literal

from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.peers import tls
from fleetcache.compute.peers.http_wire import NOT_CACHED_HEADER
from fleetcache.compute.rpcapi import Peer
from fleetcache.image import ImageMeta, ImageSource, ProgressCallback, http_into
from fleetcache.image.chunks import receive_buffer
from fleetcache.image.glance import paced_read
from fleetcache.image.prompt_chunks import prompt_reads
from fleetcache.image.source import Buffer, Writer

LOG = logging.getLogger(__name__)

#: Seconds to open a TCP connection to a peer of the same site.
CONNECT_TIMEOUT = 5.0
#: The route of the image server (:mod:`~fleetcache.compute.peers.server`).
ROUTE = "/v1/images/"
#: Statuses after which a peer is asked again (after its ``Retry-After``).
RETRY_STATUSES = frozenset({429, 503})
#: Seconds waited for a peer that asked to be retried without saying when, and the longest
#: ``Retry-After`` taken (a longer one is read as this).
DEFAULT_RETRY_AFTER = 5.0
MAX_RETRY_AFTER = 60.0
#: Least pause between two walks of the peers that sent nothing (no busy loop).
MIN_PAUSE = 0.2
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+)$")

#: The first word of a fallback after peers (:attr:`PeerSource.fallback_kind`).
FallbackKind = Literal["peer_failed", "peer_absent"]
#: How a peer's image is asked for: ``opener(url, headers)`` is the response for the block
#: (:func:`fleetcache.image.http_into.get`; tests give their own).
Opener = Callable[[str, Mapping[str, str]], contextlib.AbstractContextManager[http_into.Body]]


@dataclasses.dataclass
class PeerAttempt:
    """What one source did for one download: ``outcome`` is ``done``, or why it was left."""

    host: str
    bytes: int = 0
    outcome: str = "done"
    #: False for the origin taking over (``host`` is then ``origin``).
    peer: bool = True
    #: Seconds after which the peer asked to be asked again; None: it did not.
    retry_after: float | None = None
    #: Whether the peer answered that it does not hold the image (its 404 said so).
    absent: bool = False


class PeersFailed(exception.ImageFetchError):
    """Every peer failed in transport (nothing wrong was detected in their bytes)."""


def image_url(peer: Peer, image_id: str) -> str:
    """The URL of ``image_id`` on ``peer``, whose ``url`` is its image server's
    (``PeerServer.url``); a ``url`` already ending in the image's route is taken as it is."""
    url = peer["url"].rstrip("/")
    if url.endswith(ROUTE + image_id):
        return url
    return f"{url}{ROUTE}{image_id}"


class _Left(Exception):
    """A peer is left for the next source; the message says why.

    :ivar retry_after: seconds after which the peer asked to be asked again (it is busy, or
        its own download is not that far yet); None: it did not.
    :ivar absent: whether the peer answered that it does not hold the image (its 404 said
        so).
    """

    def __init__(self, why: str, retry_after: float | None = None,
                 absent: bool = False) -> None:
        super().__init__(why)
        self.retry_after = retry_after
        self.absent = absent


class PeerSource(ImageSource):
    """``meta``'s bytes from ``peers`` in order, then the rest from ``origin`` if given.

    :param opener: how a peer is asked (:data:`Opener`); None: over HTTP, with this host's
        peer TLS settings.
    :param clock: monotonic seconds, and ``sleep``: the pause between two walks of the peers
        (tests pass their own).
    :param until: the call's end time (epoch seconds; its terms, RPC 1.5): a wait for the
        peers stops there and calls ``at_end``, which raises the call's pause (bytes that
        arrive are paused by the terms' writer; a wait writes none). None: no end.
    :param at_peers_gone: called with this source once no peer is left, instead of
        resuming from ``origin``: it raises the call's hand-back to the conductor (RPC 1.7),
        naming :attr:`failed_hosts` and :attr:`absent_hosts`. None: ``origin`` resumes.
    :ivar attempts: one per source asked, in order (the origin's host is ``origin``).
    """

    def __init__(self, conf: cfg.ConfigOpts, peers: Sequence[Peer],
                 origin: ImageSource | None = None,
                 opener: Opener | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 until: float | None = None,
                 at_end: Callable[[], None] | None = None,
                 at_peers_gone: Callable[[PeerSource], None] | None = None
                 ) -> None:
        super().__init__(conf)
        self.peers = tuple(peers)
        self.origin = origin
        self.tls = tls.load(conf)
        #: The largest read, as from Glance. A source still downloading (cut-through) sends
        #: each chunk once it is written, so every hop of a chain delays the bytes by about
        #: one read; reads are sized to arrive in about 1/32 s
        #: (:mod:`~fleetcache.image.prompt_chunks`), so a hop costs at most about 1/32 s
        #: whatever this is (it binds only above 128 MiB/s for 4 MiB; docs/performance.md,
        #: "Peer distribution"). A paced download reads less (:meth:`paced`).
        self.chunk_size: int = conf.glance.download_chunk_size
        self.stall_timeout: float = conf.image_cache.peer_stall_timeout
        self.opener = opener or peer_opener(
            self.tls, self.stall_timeout,
            source_address=conf.image_cache.peer_listen_address or conf.my_ip)
        self.wait_timeout: float = float(conf.image_cache.peer_wait_timeout)
        self.attempts: list[PeerAttempt] = []
        self._clock = clock
        self._sleep = sleep
        self.until = until
        self.at_end = at_end
        self.at_peers_gone = at_peers_gone

    def paced(self, rate: int) -> PeerSource:
        """This source, its reads (and its origin's) made as small as Glance's at ``rate``
        bytes a second (:func:`~fleetcache.image.glance.paced_read`). A
        writer paced at ``rate`` takes that long per chunk, and a read of a peer's bytes
        buffered meanwhile arrives at once, so unpaced reads would grow to the largest and
        the peer's send would wait a whole chunk's time between two reads, up to its
        ``peer_stall_timeout``. Tuned in place: a peer source serves one download."""
        self.chunk_size = min(self.chunk_size, paced_read(rate))
        if self.origin is not None:
            self.origin = self.origin.paced(rate)
        return self

    @property
    def bytes_from_peers(self) -> int:
        """Bytes written from peers (those of a peer that failed included)."""
        return sum(a.bytes for a in self.attempts if a.peer)

    @property
    def bytes_from_origin(self) -> int:
        """Bytes written from the origin after the peers failed."""
        return sum(a.bytes for a in self.attempts if not a.peer)

    @property
    def contributors(self) -> tuple[str, ...]:
        """Peers whose bytes were written, in order (each once)."""
        hosts = [a.host for a in self.attempts if a.bytes and a.peer]
        return tuple(dict.fromkeys(hosts))

    @property
    def last_peer(self) -> str | None:
        """The peer that sent the last peer bytes."""
        hosts = self.contributors
        return hosts[-1] if hosts else None

    @property
    def failed_hosts(self) -> tuple[str, ...]:
        """Peers that failed an attempt in transport, in order (each once): not those that
        only asked to be asked again (busy, or their own download not that far yet), nor
        those that only answered that they do not hold the image (:attr:`absent_hosts`)."""
        return tuple(dict.fromkeys(a.host for a in self.attempts if _failed(a)))

    @property
    def absent_hosts(self) -> tuple[str, ...]:
        """Peers that answered that they do not hold the image (a 404 that says so,
        :func:`_check_response`) and failed no attempt otherwise, in order (each once)."""
        failed = set(self.failed_hosts)
        return tuple(dict.fromkeys(a.host for a in self.attempts
                                   if a.absent and a.host not in failed))

    @property
    def fallback_kind(self) -> FallbackKind:
        """The first word of a fallback after these peers: ``peer_absent`` when every peer
        given only answered that it does not hold the image (none failed, none was still
        busy when the wait ended), else ``peer_failed``."""
        absent = set(self.absent_hosts)
        given = {p["host"] for p in self.peers}
        return "peer_absent" if absent and absent == given else "peer_failed"

    @property
    def failures(self) -> list[PeerAttempt]:
        return [a for a in self.attempts if a.outcome != "done"]

    def failure(self) -> str:
        """``<host>: <why>`` of the last peer that failed (``no peer``: none did)."""
        last = self.failures[-1] if self.failures else None
        return f"{last.host}: {last.outcome}" if last else "no peer"

    def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        raise NotImplementedError("image metadata comes from the image service, never a peer")

    def download(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                 progress: ProgressCallback | None = None) -> int:
        """:raises PeersFailed: every peer failed and the origin could not take over."""
        written = 0
        live = list(self.peers)
        patience = self._clock() + self.wait_timeout
        while live:
            pauses: list[float] = []
            sent = False
            for peer in list(live):
                attempt = self._attempt(peer, meta, writer, written, progress)
                written += attempt.bytes
                if attempt.outcome == "done" or written == meta.size:  # only the end got lost
                    return written
                if attempt.bytes:
                    patience, sent = self._clock() + self.wait_timeout, True
                elif attempt.retry_after is not None:
                    pauses.append(attempt.retry_after)
                else:
                    live.remove(peer)  # dead to us: refused, not found, another size
            left = patience - self._clock()
            if not live or left <= 0:
                break
            if not sent:  # every peer left asked to be asked again: never a busy loop
                self._pause(min(max(min(pauses), MIN_PAUSE), left))
        if self.at_peers_gone is not None:
            self.at_peers_gone(self)
        return self._resume_from_origin(ctxt, meta, writer, written, progress)

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` for the peers, not past the call's end (:attr:`at_end` then)."""
        if self.until is not None:
            seconds = min(seconds, max(self.until - time.time(), 0.0))
        self._sleep(seconds)
        if self.until is not None and time.time() >= self.until and self.at_end is not None:
            self.at_end()

    def _attempt(self, peer: Peer, meta: ImageMeta, writer: Writer, written: int,
                 progress: ProgressCallback | None) -> PeerAttempt:
        """Ask ``peer`` for the image from byte ``written``: :returns: what it did."""
        attempt = PeerAttempt(peer["host"])
        self.attempts.append(attempt)
        try:
            self._stream(peer, meta, writer, written, attempt, progress)
        except _Left as exc:
            attempt.outcome, attempt.retry_after, attempt.absent = (
                str(exc), exc.retry_after, exc.absent)
            # A peer asking to be asked again is no fault (busy, or behind this host).
            level = logging.INFO if exc.retry_after is not None else logging.WARNING
            LOG.log(level, "Image %s: peer %s left after %d bytes: %s", meta.id,
                    peer["host"], attempt.bytes, exc)
        return attempt

    def _resume_from_origin(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                            written: int, progress: ProgressCallback | None) -> int:
        why = self.failure()
        if not written or self.origin is None:
            raise PeersFailed(image_id=meta.id, reason=why)
        LOG.info("Image %s: every peer failed (%s); resuming from the origin at byte %d",
                 meta.id, why, written)
        try:
            got = self.origin.download_from(ctxt, meta, writer, written, progress)
        except NotImplementedError as exc:
            raise PeersFailed(image_id=meta.id, reason=why) from exc
        self.attempts.append(PeerAttempt("origin", got, peer=False))
        return written + got

    def _stream(self, peer: Peer, meta: ImageMeta, writer: Writer, offset: int,
                attempt: PeerAttempt, progress: ProgressCallback | None) -> None:
        """Write the image from ``offset`` on as ``peer`` sends it; ``attempt.bytes`` grows
        with every chunk written. :raises _Left: the peer failed (errors of ``writer``, a
        refused format for one, propagate as they are)."""
        url = image_url(peer, meta.id)
        if self.tls is not None and not url.startswith("https://"):
            raise _Left("a plain HTTP peer while [image_cache] peer_ssl_* is set")
        headers = {"Authorization": peer["authorization"], "Accept-Encoding": "identity",
                   "User-Agent": "fleetcache"}
        if offset:
            headers["Range"] = f"bytes={offset}-"
        with contextlib.ExitStack() as stack:
            try:
                body = stack.enter_context(self.opener(url, headers))
            except (OSError, http.client.HTTPException, ValueError) as exc:
                raise _Left(f"cannot connect: {exc}") from exc
            end = _check_response(body, meta, offset, peer.get("not_cached_header") is True)
            for chunk in _chunks(body, self.chunk_size, writer):
                left = end - offset - attempt.bytes
                if len(chunk) > left:  # never past the image's end
                    chunk = chunk[:left]
                if not chunk:
                    break
                writer.write(chunk)
                attempt.bytes += len(chunk)
                if progress is not None:
                    progress(offset + attempt.bytes)
        if offset + attempt.bytes != end:
            raise _Left(f"body ended at byte {offset + attempt.bytes} of {end}")


def _not_cached(named: str, image_id: str, marks_not_cached: bool) -> bool:
    """Whether a 404 whose :data:`~.http_wire.NOT_CACHED_HEADER` is ``named`` ("": none)
    says that the peer does not hold ``image_id``."""
    named = named.strip()
    if not named:  # an older server marks none of its 404s
        return not marks_not_cached
    return named.lower() == image_id.lower()


def _failed(attempt: PeerAttempt) -> bool:
    """Whether a peer failed ``attempt`` in transport (not: sent the rest, asked to be asked
    again, or does not hold the image)."""
    return (attempt.peer and attempt.outcome != "done" and attempt.retry_after is None
            and not attempt.absent)


def peer_opener(files: tls.PeerTLSFiles | None, stall_timeout: float,
                source_address: str | None = None) -> Opener:
    """How a receiver asks its peers: :func:`~fleetcache.image.http_into.get`, each read
    bounded by ``stall_timeout``; with ``files``, mutual TLS (:func:`~.tls.client_context`)
    for ``https://`` peers; from ``source_address`` when given: the address of this host's
    own image server, which the conductor names in its credentials
    (``peer_check_source_address``), although the route to a peer may leave from another
    (a second address of the interface, another network's).

    :raises InvalidConfiguration: the TLS files cannot be loaded.
    """
    transport = http_into.Transport(
        timeout=stall_timeout, connect_timeout=CONNECT_TIMEOUT,
        tls=tls.client_context(files) if files is not None else None,
        source_address=source_address)
    return functools.partial(http_into.get, transport=transport)


def _chunks(body: http_into.Body, size: int, writer: Writer) -> Iterator[Buffer]:
    """The body's chunks read into ``writer``'s buffers
    (:func:`~fleetcache.image.prompt_chunks.prompt_reads`, at most ``size``); a transport
    failure (a stall, a body cut short of its length) is :class:`_Left`."""
    it = prompt_reads(body.readinto, functools.partial(receive_buffer, writer), size)
    while True:
        try:
            chunk = next(it, None)
        except (OSError, http.client.HTTPException) as exc:
            raise _Left(f"transfer failed: {exc}") from exc
        if chunk is None:
            return
        yield chunk


def _check_response(resp: http_into.Body, meta: ImageMeta, offset: int,
                    marks_not_cached: bool = False) -> int:
    """Where the body ends (the image's size). :raises _Left: a status other than 200 (from
    byte 0) or 206 (from ``offset``), a body of another image size than Glance's, or an
    encoded body (its bytes are not the image's); ``absent`` for the server's own answer
    that it does not hold the image, not a wrong route or another service: a 404 whose
    :data:`~.http_wire.NOT_CACHED_HEADER` names it, or any 404 without that header from a
    peer that does not say it sends one (``marks_not_cached`` False: a server from before
    the header, :attr:`~fleetcache.compute.rpcapi.Peer.not_cached_header`)."""
    encoding = resp.header("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise _Left(f"the peer sent a body encoded {encoding!r}")
    if offset == 0 and resp.status == 200:
        length = resp.header("Content-Length")
        total = int(length) if length and length.isdigit() else meta.size
    elif offset and resp.status == 206:
        match = _CONTENT_RANGE.match(resp.header("Content-Range"))
        if match is None or int(match.group(1)) != offset:
            raise _Left(f"asked bytes from {offset}, got Content-Range "
                        f"{resp.header('Content-Range')!r}")
        total = int(match.group(3))
    elif resp.status in RETRY_STATUSES:
        raise _Left(f"HTTP {resp.status}", retry_after(resp.header("Retry-After") or None))
    elif resp.status == 404 and _not_cached(resp.header(NOT_CACHED_HEADER), meta.id,
                                            marks_not_cached):
        raise _Left("HTTP 404: the image is not cached there", absent=True)
    else:
        raise _Left(f"HTTP {resp.status}")
    if total is None or (meta.size is not None and total != meta.size):
        raise _Left(f"serves {total} bytes, the image has {meta.size}")
    return total


def retry_after(value: str | None) -> float:
    """The seconds of a ``Retry-After`` in seconds (an HTTP date, or none, is read as
    :data:`DEFAULT_RETRY_AFTER`), at most :data:`MAX_RETRY_AFTER`."""
    try:
        seconds = float(value) if value is not None else DEFAULT_RETRY_AFTER
    except ValueError:
        seconds = DEFAULT_RETRY_AFTER
    if not 0 <= seconds < float("inf"):
        seconds = DEFAULT_RETRY_AFTER
    return min(seconds, MAX_RETRY_AFTER)
