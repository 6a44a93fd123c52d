"""An HTTP server on 127.0.0.1 that resets the connection of its first requests, then answers
JSON: what a keep-alive server (gunicorn, Apache) does to a client whose request goes out on a
pooled connection the server is closing (``ConnectionResetError``: "Connection reset by
peer"). Use::

    with ResettingServer({"/v3/limits/model": {...}}, resets=1) as server:
        ...  # a client of server.url
    assert server.paths == [...]   # every request's path, the reset ones included
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import urllib.parse
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


class ResettingServer:
    """Answers a GET of a path in ``routes`` (query ignored) with its JSON body, else 404; the
    first ``resets`` requests get a TCP reset instead of an answer."""

    def __init__(self, routes: Mapping[str, Any], resets: int) -> None:
        self.routes = dict(routes)
        self.resets = resets
        self.paths: list[str] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_port}"

    def _take_reset(self, path: str) -> bool:
        with self._lock:
            self.paths.append(path)
            if self.resets <= 0:
                return False
            self.resets -= 1
            return True

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path = urllib.parse.urlsplit(self.path).path
                if server._take_reset(path):
                    # SO_LINGER 0: close() sends RST, not FIN, as a server dropping the socket.
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                    return
                body = server.routes.get(path.rstrip("/") or "/")
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

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
