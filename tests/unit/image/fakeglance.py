"""A small in-test stand-in for Glance's v2 image API, over real HTTP on 127.0.0.1.

Serves ``GET /v2/images/<id>`` (JSON) and ``GET /v2/images/<id>/file`` (200, or 206 for a
``Range: bytes=N-`` request, as Glance does), over https when given a certificate, counts
requests, and injects faults: an error status for the next requests, a redirect, a connection
cut after some bytes, ignoring ``Range``. It is
for unit tests of the HTTP client; the integration tests use the real Glance.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ROUTE = re.compile(r"^/v2/images/([^/]+)(/file)?$")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-body (the tests do that on purpose)


class FakeGlance:
    """``tls``: serve https with this certificate and key (PEM paths)."""

    def __init__(self, tls: tuple[str, str] | None = None) -> None:
        self.images: dict[str, tuple[dict[str, Any], bytes]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.statuses: list[int] = []  # served (one each) before anything else
        self.redirects: list[str] = []  # per /file GET: a 302 to this path first
        self.cuts: list[int] = []  # per /file GET: bytes sent before the connection is cut
        self.ignore_range = False
        self.file_delay = 0.0  # seconds to wait before sending a /file body
        self.lock = threading.Lock()
        self.server = _Server(("127.0.0.1", 0), _handler(self))
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> FakeGlance:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add(self, data: bytes, image_id: str | None = None, **fields: Any) -> dict[str, Any]:
        image_id = image_id or str(uuid.uuid4())
        meta = {
            "id": image_id, "name": image_id, "status": "active", "disk_format": "raw",
            "container_format": "bare", "size": len(data),
            "checksum": hashlib.md5(data).hexdigest(), "os_hash_algo": "sha512",
            "os_hash_value": hashlib.sha512(data).hexdigest(), "visibility": "shared",
            **fields,
        }
        self.images[image_id] = (meta, data)
        return meta

    def file_gets(self, image_id: str) -> list[dict[str, str]]:
        """Headers (names in lower case) of each ``GET .../file`` of ``image_id``."""
        path = f"/v2/images/{image_id}/file"
        return [h for p, h in self.requests if p == path]


def _handler(glance: FakeGlance) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            with glance.lock:
                glance.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                status = glance.statuses.pop(0) if glance.statuses else None
            if status is not None:
                return self._send(status, b'{"error": "injected"}', "application/json")
            match = _ROUTE.match(self.path)
            if not match or match.group(1) not in glance.images:
                return self._send(404, b"<html>404 Not Found</html>", "text/html")
            meta, data = glance.images[match.group(1)]
            if not match.group(2):
                return self._send(200, json.dumps(meta).encode(), "application/json")
            with glance.lock:
                location = glance.redirects.pop(0) if glance.redirects else None
            if location is not None:
                self.send_response(302)
                self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            self._send_file(data)

        def _send_file(self, data: bytes) -> None:
            start = 0
            rng = re.match(r"bytes=(\d+)-$", self.headers.get("Range", ""))
            if rng and not glance.ignore_range:
                start = int(rng.group(1))
            body = memoryview(data)[start:]
            with glance.lock:
                cut = glance.cuts.pop(0) if glance.cuts else None
            time.sleep(glance.file_delay)
            self.send_response(206 if start else 200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            if cut is None:
                self.wfile.write(body)
                return
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
