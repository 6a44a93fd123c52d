"""An HTTP server on 127.0.0.1 that resets the connection of its first requests: what a
keep-alive server (gunicorn, Apache) does to a client whose request goes out on a pooled
connection the server is closing (``ConnectionResetError``: "Connection reset by peer").

It answers GETs from a table of JSON bodies, or forwards every request to a real service
(``upstream``); with ``after_answering`` a reset request has been served first (the upstream
applied it, only its answer is lost), as when the connection drops on the way back. Use::

    with ResettingServer({"/v3/limits/model": {...}}, resets=1) as server:
        ...  # a client of server.url
    assert server.paths == [...]   # every request's path, the reset ones included
"""

from __future__ import annotations

import http.client
import json
import socket
import struct
import threading
import urllib.parse
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

#: (status, headers, body) of an answer.
Answer = tuple[int, list[tuple[str, str]], bytes]

#: Headers not relayed either way: the relay sets its own length, ``Date`` and ``Server``
#: (``send_response``), and keeps each connection's framing to itself.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "content-length", "date", "server"}


class ResettingServer:
    """Answers a GET of a path in ``routes`` (query ignored) with its JSON body, else 404, or
    relays every request to ``upstream`` (``http://host:port``) when given; the first
    ``resets`` requests get a TCP reset instead of an answer, after the request was answered
    or relayed when ``after_answering``."""

    def __init__(self, routes: Mapping[str, Any] | None = None, *, resets: int,
                 upstream: str | None = None, after_answering: bool = False) -> None:
        self.routes = dict(routes or {})
        self.resets = resets
        self.upstream = urllib.parse.urlsplit(upstream) if upstream else None
        self.after_answering = after_answering
        self.paths: list[str] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._httpd.server_port}"

    def _take_reset(self, path: str) -> bool:
        with self._lock:
            self.paths.append(path)
            if self.resets <= 0:
                return False
            self.resets -= 1
            return True

    def _answer(self, method: str, target: str, headers: Mapping[str, str],
                body: bytes) -> Answer:
        if self.upstream is None:
            found = self.routes.get(urllib.parse.urlsplit(target).path.rstrip("/") or "/")
            if method != "GET" or found is None:
                return 404, [], b""
            return 200, [("Content-Type", "application/json")], json.dumps(found).encode()
        upstream = http.client.HTTPConnection(self.upstream.netloc, timeout=30)
        try:
            upstream.request(method, self.upstream.path.rstrip("/") + target,
                             body=body or None, headers=dict(headers))
            response = upstream.getresponse()
            return (response.status,
                    [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP],
                    response.read())
        finally:
            upstream.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            #: An idle kept-alive connection holds its thread no longer than this.
            timeout = 5

            def _serve(self) -> None:
                reset = server._take_reset(urllib.parse.urlsplit(self.path).path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if reset and not server.after_answering:
                    self._reset()
                    return
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in HOP_BY_HOP | {"host"}}
                status, answer_headers, data = server._answer(
                    self.command, self.path, headers, body)
                if reset:
                    self._reset()
                    return
                self.send_response(status)
                for name, value in answer_headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = _serve  # noqa: N815 (http.server's names)

            def _reset(self) -> None:
                # SO_LINGER 0: the socket's close, when finish() closes the last of its files,
                # sends RST, not FIN, as a server dropping the socket does.
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                """Quiet: ``paths`` records the requests."""

        return Handler

    def __enter__(self) -> ResettingServer:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
