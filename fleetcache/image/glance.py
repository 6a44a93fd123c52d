"""The Glance v2 image source: ``show`` and a resumable, streaming ``download`` over HTTP.

Requests go through a keystoneauth1 session built from the ``[glance]`` options (no
``auth_type``: no service auth; the caller's token, if any, is passed through). Endpoints come
from ``[glance] api_servers``, tried in turn, else from the Keystone catalog. A transient
failure (connection error, 502/503/504, a body cut short) is retried on the next endpoint with a
growing pause; a download resumes from the bytes already written with a ``Range`` request, so
the caller's hash still covers the whole image. ``[glance] num_retries`` bounds the retries in
a row *that bring no new bytes*: a failed attempt that made progress re-arms them (and restarts
the pause), so a long download over a link that keeps breaking goes on while it moves forward,
and one that stalls stops after ``num_retries`` fruitless retries.

A paced download (:meth:`GlanceImageSource.paced`: the caller's writer holds it to a rate) goes
through a session of its own whose connections ask for a small socket receive buffer and
Ethernet-sized segments before they connect, and reads small chunks: with Linux's autotuned
buffers, the kernels buffered megabytes ahead of the paced reader and Glance sent a capped
image at more than twice the cap (docs/performance.md, "Capped downloads as the image
service sees them").

Each read is sized to about 1/32 s of the rate the bytes arrive at, up to
``download_chunk_size`` (:mod:`~fleetcache.image.prompt_chunks`): over a slow link the bytes
reach the file, and any cut-through receivers, without waiting for a whole chunk. The image's
bytes are read straight into the writer's buffers (:mod:`~fleetcache.image.http_into`, with
the session's TLS settings and token), unless a proxy of the environment applies to the
endpoint: then the session streams them.

HTTP and keystoneauth errors are translated to the fleetcache exception tree in one place,
:func:`_translated` and :func:`_check_status`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import http.client
import logging
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import requests
import urllib3
from keystoneauth1 import exceptions as ksa_exc
from keystoneauth1 import session as ksa_session
from oslo_config import cfg
from requests.adapters import HTTPAdapter

from fleetcache.common import exception, service_auth
from fleetcache.common.context import RequestContext
from fleetcache.image import http_into
from fleetcache.image.chunks import receive_buffer
from fleetcache.image.prompt_chunks import prompt_chunks, prompt_reads
from fleetcache.image.source import Buffer, ImageMeta, ImageSource, ProgressCallback, Writer

LOG = logging.getLogger(__name__)
T = TypeVar("T")

_RETRY_STATUSES = frozenset({502, 503, 504})
#: Statuses of a redirect, which the keystoneauth session follows.
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CONTENT_RANGE = re.compile(r"bytes (\d+)-\d+/(?:\d+|\*)")
_VERSION_SUFFIX = re.compile(r"/v\d+(\.\d+)?/?$")
#: Bounds of a paced download's receive buffer (see :func:`paced_buffer`).
MIN_PACED_BUFFER = 64 * 1024
MAX_PACED_BUFFER = 4 * 1024 * 1024
#: The TCP segment size a paced download's connection announces (Ethernet's, with
#: timestamps): an upper bound, below a path's own.
PACED_SEGMENT = 1448


class _Transient(Exception):
    """A failure worth another attempt on the next endpoint."""


@contextlib.contextmanager
def _translated(image_id: str, url: str) -> Iterator[None]:
    """Map requests and keystoneauth errors raised inside the block (the one place)."""
    try:
        yield
    except (ksa_exc.ConnectionError, requests.ConnectionError, requests.Timeout,
            requests.exceptions.ChunkedEncodingError, urllib3.exceptions.ProtocolError,
            urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.SSLError) as exc:
        raise _Transient(f"GET {url}: {exc}") from exc
    except (ksa_exc.ClientException, requests.RequestException,
            urllib3.exceptions.HTTPError) as exc:
        raise exception.ImageFetchError(image_id=image_id, reason=f"GET {url}: {exc}") from exc


def _read_by(chunks: Iterator[Buffer], image_id: str, url: str) -> Iterator[Buffer]:
    """``chunks``, the errors of each read mapped by :func:`_reading` (not those of the
    consumer between reads)."""
    while True:
        with _reading(image_id, url):
            chunk = next(chunks, None)
        if chunk is None:
            return
        yield chunk


@contextlib.contextmanager
def _reading(image_id: str, url: str) -> Iterator[None]:
    """Map the errors of a direct GET's connection and reads (:mod:`http_into`): a transient
    failure, or a URL it cannot take; only around them: an ``OSError`` of the writer is not
    the network's."""
    try:
        yield
    except (OSError, http.client.HTTPException) as exc:
        raise _Transient(f"GET {url}: {exc}") from exc
    except ValueError as exc:
        raise exception.ImageFetchError(image_id=image_id, reason=f"GET {url}: {exc}") from exc


def _check_status(resp: requests.Response, image_id: str) -> None:
    """Map an HTTP error status of the image service to a fleetcache exception."""
    _check_code(resp.status_code, resp.url, image_id,
                lambda: next(resp.iter_content(300), b""))


def _check_code(code: int, url: str, image_id: str, head: Callable[[], bytes]) -> None:
    """Map HTTP status ``code`` of a GET of ``url`` to a fleetcache exception; ``head``: the
    start of the body, which explains an error that has no exception of its own."""
    if code < 300:
        return
    detail = f"HTTP {code} from GET {url}"
    if code == 404:
        raise exception.ImageNotFound(image_id=image_id)
    if code == 403:
        raise exception.ImageNotAvailable(image_id=image_id, reason=f"forbidden ({detail})")
    if code in _RETRY_STATUSES:
        raise _Transient(detail)
    body = head().decode("utf-8", "replace").strip()
    raise exception.ImageFetchError(image_id=image_id, reason=f"{detail}: {body}".rstrip(": "))


def paced_buffer(rate: int) -> int:
    """The receive buffer asked for a download paced at ``rate`` bytes a second: a
    sixty-fourth of a second's worth, rounded down to a power of two, within
    :data:`MIN_PACED_BUFFER` and :data:`MAX_PACED_BUFFER`.

    Linux doubles what ``SO_RCVBUF`` asks and offers about half of it as the TCP window, so
    the window is about the value: it carries the rate over a round trip of up to 1/64 s
    (15 ms; longer at rates whose buffer is the minimum), and it bounds how far the sender
    gets ahead of the reader, with the sender's own buffer, which grows with the window
    it is offered (docs/performance.md, "Capped downloads as the image service sees them").
    """
    wanted = min(max(rate // 64, MIN_PACED_BUFFER), MAX_PACED_BUFFER)
    return 1 << (wanted.bit_length() - 1)


def paced_read(rate: int) -> int:
    """The largest read of a download paced at ``rate`` bytes a second, from Glance or a
    peer: half its :func:`paced_buffer`."""
    return paced_buffer(rate) // 2


class _SmallReceiveBuffer(HTTPAdapter):
    """Connections that ask, before they connect, for a small receive buffer (set later, it
    would not bound the window TCP already offered) and Ethernet-sized segments (the MSS
    they announce: over loopback or jumbo frames, 64 KiB or 9 KiB segments let the sender's
    buffer grow to megabytes), with urllib3's default option (``TCP_NODELAY``) kept: socket
    options given replace the defaults."""

    def __init__(self, receive_buffer: int) -> None:
        self.receive_buffer = receive_buffer
        super().__init__()

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False,
                         **pool_kwargs: Any) -> None:
        pool_kwargs["socket_options"] = _socket_options(self.receive_buffer)
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)


def _socket_options(receive_buffer: int | None) -> list[http_into.SocketOption]:
    """Options of a connection to the image service, set before it connects: urllib3's
    default (``TCP_NODELAY``), and for a paced download its receive buffer and segment size."""
    options = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    if receive_buffer is not None:
        options += [(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer),
                    (socket.IPPROTO_TCP, socket.TCP_MAXSEG, PACED_SEGMENT)]
    return options


def _load_session(conf: cfg.ConfigOpts, receive_buffer: int | None = None,
                  ) -> tuple[ksa_session.Session, bool]:
    """The keystoneauth session of ``[glance]`` and whether it carries service auth.

    :param receive_buffer: ``SO_RCVBUF`` of its connections; None: the kernel's autotuning.
    :raises InvalidConfiguration: for a mistake in the ``[glance]`` auth options.
    """
    kwargs: dict[str, object] = {}
    if receive_buffer is not None:
        http = requests.Session()
        adapter = _SmallReceiveBuffer(receive_buffer)
        http.mount("https://", adapter)
        http.mount("http://", adapter)
        kwargs["session"] = http
    sess, auth = service_auth.load_session(conf, "glance", app_name="fleetcache", **kwargs)
    return sess, auth is not None


class GlanceImageSource(ImageSource):
    """Images from the Glance v2 API."""

    #: Seconds before the first retry; doubles per retry, capped by ``max_retry_delay``.
    retry_delay = 1.0
    max_retry_delay = 10.0

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        super().__init__(conf)
        opts = conf.glance
        self.session, self._service_auth = _load_session(conf)
        self.api_servers = [_VERSION_SUFFIX.sub("", u).rstrip("/") for u in opts.api_servers]
        if not self.api_servers and not self._service_auth:
            raise exception.InvalidConfiguration(
                reason="[glance] api_servers is empty and no [glance] auth_type is set to find "
                "the image service in the Keystone catalog")
        self.num_retries: int = opts.num_retries
        self.chunk_size: int = opts.download_chunk_size
        self.timeout: float = opts.request_timeout
        #: How a GET of the image's bytes reaches the image service (:mod:`http_into`).
        self.transport = http_into.Transport(self.timeout, _socket_options(None),
                                             self._tls_context())
        #: The paced variants by receive buffer, built once each (:meth:`paced`).
        self._paced: dict[int, GlanceImageSource] = {}
        self._paced_lock = threading.Lock()

    def paced(self, rate: int) -> GlanceImageSource:
        """This source with a session whose connections ask for :func:`paced_buffer`
        ``(rate)`` of receive buffer, reading chunks of half that (at most
        ``download_chunk_size``); one per buffer size, shared by the variants."""
        buffer = paced_buffer(rate)
        with self._paced_lock:
            variant = self._paced.get(buffer)
            if variant is None:
                variant = copy.copy(self)
                variant.session, _ = _load_session(self.conf, buffer)
                variant.chunk_size = min(self.chunk_size, paced_read(rate))
                variant.transport = dataclasses.replace(
                    self.transport, socket_options=_socket_options(buffer))
                self._paced[buffer] = variant
        return variant

    def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        def attempt(n: int) -> ImageMeta:
            with self._get(ctxt, image_id, n, "") as resp, \
                    _translated(image_id, resp.url):
                body = resp.json()
            return ImageMeta.from_dict(body)

        return self.check_active(self._with_retries(image_id, attempt))

    def download_from(
        self,
        ctxt: RequestContext,
        meta: ImageMeta,
        writer: Writer,
        offset: int,
        progress: ProgressCallback | None = None,
    ) -> int:
        image_id = meta.id
        written = [offset]

        def attempt(n: int) -> int:
            if written[0] and meta.size is not None and written[0] >= meta.size:
                return written[0]  # the body was complete; only its end got lost
            self._stream(ctxt, image_id, n, written, writer, progress)
            return written[0]

        return self._with_retries(image_id, attempt, written) - offset

    def _stream(self, ctxt: RequestContext, image_id: str, n: int, written: list[int],
                writer: Writer, progress: ProgressCallback | None) -> None:
        """One GET of the image data, from byte ``written[0]`` on, into ``writer``."""
        offset = written[0]
        headers = {"Accept-Encoding": "identity"}  # bytes as stored: hashes and Range hold
        if offset:
            headers["Range"] = f"bytes={offset}-"
        url = self._url(n, image_id, "/file")
        if not http_into.reaches_directly(url):
            self._stream_by_session(ctxt, image_id, n, headers, written, writer, progress)
            return
        with contextlib.ExitStack() as stack:
            with _reading(image_id, url):
                body = stack.enter_context(http_into.get(
                    url, headers | self._auth_headers(ctxt, image_id, url), self.transport))
            if body.status in _REDIRECTS:  # the session follows them, as it did
                stack.close()
                self._stream_by_session(ctxt, image_id, n, headers, written, writer, progress)
                return
            if body.status == 401 and self._service_auth:  # a token revoked or expired
                self.session.invalidate()
                raise _Transient(f"HTTP 401 from GET {url}: a new service token next")
            with _reading(image_id, url):
                _check_code(body.status, url, image_id, body.head)
            if body.status == 206:
                _check_range(body.header("Content-Range"), image_id, offset)
            if body.status == 204:
                return
            chunks = prompt_reads(body.readinto, lambda size: receive_buffer(writer, size),
                                  self.chunk_size)
            self._write_all(_read_by(chunks, image_id, url),
                            offset if body.status == 200 else 0, written, writer, progress)

    def _stream_by_session(self, ctxt: RequestContext, image_id: str, n: int,
                           headers: dict[str, str], written: list[int], writer: Writer,
                           progress: ProgressCallback | None) -> None:
        """:meth:`_stream` through the keystoneauth session (the environment's proxy)."""
        offset = written[0]
        with self._get(ctxt, image_id, n, "/file", headers) as resp, \
                _translated(image_id, resp.url):
            if resp.status_code == 206:
                _check_range(resp.headers.get("Content-Range"), image_id, offset)
            if resp.status_code == 204:
                return
            self._write_all(prompt_chunks(resp.raw, self.chunk_size),
                            offset if resp.status_code == 200 else 0, written, writer, progress)

    @staticmethod
    def _write_all(chunks: Iterator[Buffer], skip: int, written: list[int], writer: Writer,
                   progress: ProgressCallback | None) -> None:
        """Write ``chunks`` but their first ``skip`` bytes (a server that ignored ``Range``
        sends what the writer already has), counting them in ``written``."""
        for chunk in chunks:
            if skip:
                cut = min(skip, len(chunk))
                chunk, skip = chunk[cut:], skip - cut
                if not chunk:
                    continue
            writer.write(chunk)
            written[0] += len(chunk)
            if progress is not None:
                progress(written[0])

    @contextlib.contextmanager
    def _get(self, ctxt: RequestContext, image_id: str, n: int, suffix: str,
             headers: dict[str, str] | None = None) -> Iterator[requests.Response]:
        """GET ``/v2/images/<id><suffix>`` on the endpoint for attempt ``n``, streamed."""
        url = self._url(n, image_id, suffix)
        headers = dict(headers or {}) | self._caller_token(ctxt)
        with _translated(image_id, url):
            resp = self.session.request(
                url, "GET", raise_exc=False, stream=True, headers=headers,
                timeout=self.timeout, global_request_id=ctxt.global_id,
                authenticated=self._service_auth)
        try:
            _check_status(resp, image_id)
            yield resp
        finally:
            resp.close()

    def _url(self, n: int, image_id: str, suffix: str) -> str:
        """``/v2/images/<id><suffix>`` on the endpoint for attempt ``n``."""
        return f"{self._endpoint(n, image_id)}/v2/images/{quote(image_id, safe='')}{suffix}"

    def _auth_headers(self, ctxt: RequestContext, image_id: str, url: str) -> dict[str, str]:
        """The headers the session would add to a GET of ``url``: the service's token (service
        auth) or the caller's, and the request's global id."""
        headers = {"User-Agent": "fleetcache"} | self._caller_token(ctxt)
        if self._service_auth:
            with _translated(image_id, url):
                headers |= self.session.get_auth_headers() or {}
        if ctxt.global_id:
            headers["X-OpenStack-Request-ID"] = ctxt.global_id
        return headers

    def _caller_token(self, ctxt: RequestContext) -> dict[str, str]:
        """The caller's token, passed through when the source has no service auth."""
        if self._service_auth or not ctxt.auth_token:
            return {}
        return {"X-Auth-Token": ctxt.auth_token}

    def _tls_context(self) -> ssl.SSLContext | None:
        """The session's TLS settings for :mod:`http_into` (None when every endpoint is
        plain http: nothing to load).

        :raises InvalidConfiguration: a CA, certificate or key file cannot be loaded.
        """
        if self.api_servers and not any(urlsplit(u).scheme == "https" for u in self.api_servers):
            return None
        try:
            return http_into.tls_context(self.session.verify, self.session.cert)
        except (OSError, ssl.SSLError) as exc:
            raise exception.InvalidConfiguration(
                reason=f"[glance] cafile, certfile or keyfile cannot be loaded: {exc}") from exc

    def _endpoint(self, n: int, image_id: str) -> str:
        if self.api_servers:
            return self.api_servers[n % len(self.api_servers)]
        with _translated(image_id, "the Keystone catalog"):
            url = self.session.get_endpoint(service_type="image",
                                            interface=["internal", "public"])
        if not url:
            raise exception.InvalidConfiguration(
                reason="no image service endpoint in the Keystone catalog")
        return _VERSION_SUFFIX.sub("", str(url)).rstrip("/")

    def _with_retries(self, image_id: str, attempt: Callable[[int], T],
                      written: list[int] | None = None) -> T:
        """Run ``attempt(n)`` (``n``: attempts so far, picks the endpoint) until it succeeds.

        ``failures`` counts transient failures since the last progress: a failed attempt that
        received bytes (``written`` grew) starts a new series as its first, so ``num_retries``
        more retries follow it.
        """
        n = failures = 0
        while True:
            before = written[0] if written else 0
            try:
                return attempt(n)
            except _Transient as exc:
                n += 1
                progressed = written is not None and written[0] > before
                failures = 1 if progressed else failures + 1
                got = f", {written[0]} bytes received" if written else ""
                if failures > self.num_retries:
                    raise exception.ImageFetchError(
                        image_id=image_id,
                        reason=f"{exc} (gave up after {n} attempts{got})") from exc
                delay = min(self.retry_delay * 2 ** (failures - 1), self.max_retry_delay)
                LOG.warning("Image %s: %s%s; retry %d of %d in %.1f s", image_id, exc, got,
                            failures, self.num_retries, delay)
                time.sleep(delay)


def _check_range(content_range: str | None, image_id: str, offset: int) -> None:
    """A 206's ``Content-Range`` must start at the ``offset`` asked for."""
    match = _CONTENT_RANGE.match(content_range or "")
    if match is None or int(match.group(1)) != offset:
        raise exception.ImageFetchError(
            image_id=image_id,
            reason=f"asked for bytes from {offset}, got Content-Range {content_range!r}")
