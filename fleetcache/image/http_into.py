"""An HTTP GET whose body is read straight into the caller's buffers.

requests (through urllib3) hands a streamed body over as a new ``bytes`` per read: the
kernel's copy into it, then the download's copy of it into a page-aligned pool buffer
(:meth:`~fleetcache.image.chunks.ChunkPool.copy_in`) while holding the GIL, which the hash
thread needs between chunks. ``http.client``'s ``readinto`` fills the pool buffer itself, the
kernel's copy only. A 1 GiB sha512 download from Glance on two cores went from 0.78 to 0.91
of one core's hash (median of 10 rounds each, alternated in one process, the hash kept to its
own CPU in both; docs/performance.md, "Download from Glance").

It does what a keystoneauth session's GET would do with the same settings: its TLS settings
(``verify``, ``cert``, requests' CA bundle and its environment overrides), socket options set
before the connection is made, a timeout on connect and on each read. What it does not do
(proxies from the environment) :func:`reaches_directly` tells, so that the caller keeps its
session for those. One connection per GET, closed after it: a download is one long GET.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import ssl
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests.utils

#: A socket option: (level, option, value), set before the connection is made.
SocketOption = tuple[int, int, int]


class BodyCut(http.client.HTTPException):
    """The server closed the connection before the body's announced length."""


@dataclass(frozen=True)
class Transport:
    """How :func:`get` reaches a server: the timeout of each read (and of the connection,
    unless ``connect_timeout`` is given), socket options, the TLS context of ``https``, and
    the local address connections come from (None: the one the kernel picks for the route).
    """

    timeout: float | None
    socket_options: Sequence[SocketOption] = ()
    tls: ssl.SSLContext | None = None
    connect_timeout: float | None = None
    source_address: str | None = None


def tls_context(verify: bool | str | None, cert: str | tuple[str, str] | None,
                ) -> ssl.SSLContext:
    """The TLS context requests would use for a session's ``verify`` and ``cert``: with
    ``verify`` True, requests' CA bundle, or the one ``REQUESTS_CA_BUNDLE`` or
    ``CURL_CA_BUNDLE`` names (requests' own rule); a path: that file or directory of CAs;
    False: no verification."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        where = verify if isinstance(verify, str) else (
            os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
            or requests.utils.DEFAULT_CA_BUNDLE_PATH)
        if os.path.isdir(where):
            context = ssl.create_default_context(capath=where)
        else:
            context = ssl.create_default_context(cafile=where)
    if isinstance(cert, tuple):
        context.load_cert_chain(*cert)
    elif cert:
        context.load_cert_chain(cert)
    return context


def reaches_directly(url: str) -> bool:
    """Whether :func:`get` would reach ``url`` as requests would: not when a proxy of the
    environment (``http_proxy``, ``https_proxy``, ``all_proxy``, less ``no_proxy``)
    applies to it."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname or ""))


class Body:
    """A response: its status and headers, and its body read into the caller's buffers."""

    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self._response = response
        length = response.getheader("Content-Length")
        chunked = "chunked" in (response.getheader("Transfer-Encoding") or "").lower()
        #: Bytes still announced (None: no Content-Length, the body ends with the connection).
        self.remaining = int(length) if length and length.isdigit() and not chunked else None

    def readinto(self, buffer: memoryview) -> int:
        """Fill ``buffer`` (less at the body's end); 0 at its end.

        :raises BodyCut: the connection ended before the announced length.
        :raises OSError: of the socket (a timeout among them).
        """
        if self.remaining is not None and len(buffer) > self.remaining:
            buffer = buffer[:self.remaining]
        if not buffer:
            return 0
        n = self._response.readinto(buffer)
        if self.remaining is not None:
            if not n:
                raise BodyCut(f"the body ended {self.remaining} bytes short of its "
                              "Content-Length")
            self.remaining -= n
        return n

    def header(self, name: str, default: str = "") -> str:
        """The value of header ``name`` (any case), else ``default``."""
        return self._response.getheader(name, default)

    def head(self, limit: int = 300) -> bytes:
        """Up to ``limit`` bytes of the body (an error's explanation)."""
        return self._response.read(limit)


class _Connection(http.client.HTTPConnection):
    """A connection whose socket gets its options before it connects (a receive buffer set
    later would not bound the window TCP already offered), and TLS when given a context."""

    def __init__(self, host: str, port: int, transport: Transport,
                 tls: ssl.SSLContext | None) -> None:
        super().__init__(host, port, timeout=transport.timeout)
        self.transport, self.tls = transport, tls
        if tls is not None:  # the Host header names no port on the scheme's own
            self.default_port = http.client.HTTPS_PORT

    def connect(self) -> None:
        self.sock = self._open()

    def _open(self) -> socket.socket:
        error: OSError | None = None
        for family, kind, proto, _, address in socket.getaddrinfo(
                self.host, self.port, 0, socket.SOCK_STREAM):
            sock = socket.socket(family, kind, proto)
            try:
                for option in self.transport.socket_options:
                    sock.setsockopt(*option)
                if self.transport.source_address is not None:
                    sock.bind((self.transport.source_address, 0))
                connect_timeout = self.transport.connect_timeout
                sock.settimeout(self.transport.timeout if connect_timeout is None
                                else connect_timeout)
                sock.connect(address)
                if self.tls is not None:  # the handshake is part of connecting
                    sock = self.tls.wrap_socket(sock, server_hostname=self.host)
                sock.settimeout(self.transport.timeout)
                return sock
            except OSError as exc:
                sock.close()
                error = exc
        raise error or OSError(f"no address for {self.host}")


@contextlib.contextmanager
def get(url: str, headers: Mapping[str, str], transport: Transport) -> Iterator[Body]:
    """GET ``url`` (``http`` or ``https``) and yield its response; the connection is closed
    after the block.

    :raises OSError: connecting or sending (refused, timed out, TLS).
    :raises http.client.HTTPException: a response that is not HTTP.
    :raises ValueError: ``url`` is not an http(s) URL with a host and a valid port.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url}")
    port = parts.port  # raises ValueError for a port out of range
    https = parts.scheme == "https"
    if https and transport.tls is None:
        raise ValueError(f"{url}: https needs a TLS context")
    connection = _Connection(parts.hostname, port or (443 if https else 80), transport,
                             transport.tls if https else None)
    try:
        target = parts.path or "/"
        if parts.query:
            target += f"?{parts.query}"
        connection.request("GET", target, headers=dict(headers))
        yield Body(connection.getresponse())
    finally:
        connection.close()
