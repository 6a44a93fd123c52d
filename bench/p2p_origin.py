"""The origin of ``bench/p2p.py``: a small Glance stand-in in a process of its own.

It serves ``GET /v2/images/<id>`` (the image's record) and ``GET /v2/images/<id>/file``
(200, or 206 for ``Range: bytes=N-``) from one file of random bytes per kind, under a fresh
image id per point, and logs the body bytes it sent per group: one of the independent counts
of origin bytes the report checks against each other. With Tier B it also shapes each
group's egress with a ``TokenBucket`` (Tier A's shaping is tc's, on its veths).

"Sent" is what its TCP put on the wire (``TCP_INFO``'s bytes sent less those retransmitted),
not what it wrote into its socket: when a receiver dies, what its socket's send buffer still
held is never sent, and was 0.6-1.1 MiB per dead host, the difference between this log and
the veth's counters (docs/performance.md, "Peer distribution"). What was written and never
sent is logged beside it (``unsent_bytes``). A body whose every write returned before its
receiver died is counted whole (what its socket still held is not known then).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing.connection
import os
import re
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from p2p_links import ORIGIN_PORT, enter_netns

MIB = 1024 * 1024
CHUNK = 256 * 1024
#: ``struct tcp_info`` (linux/tcp.h): the offset of ``tcpi_bytes_sent`` and
#: ``tcpi_bytes_retrans`` (Linux 4.19 and later), two native u64s.
_TCP_INFO_BYTES_SENT = 200
_TCP_INFO_LEN = 216


def unique_bytes_sent(sock: socket.socket) -> int:
    """The bytes ``sock``'s TCP has put on the wire, each once (retransmissions not counted)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
    if len(info) < _TCP_INFO_LEN:
        raise RuntimeError("this kernel's TCP_INFO has no bytes_sent (Linux 4.19 and later)")
    sent, retransmitted = struct.unpack_from("=QQ", info, _TCP_INFO_BYTES_SENT)
    return int(sent - retransmitted)


class _CountingWriter:
    """The handler's ``wfile``, counting what is written into the connection."""

    def __init__(self, wfile: Any) -> None:
        self.wfile, self.written = wfile, 0

    def write(self, data: bytes | memoryview) -> int:
        n = self.wfile.write(data)
        self.written += len(data)
        return int(n) if n is not None else len(data)

    def flush(self) -> None:
        self.wfile.flush()


def make_image(path: Path, size: int) -> dict[str, Any]:
    digest, md5 = hashlib.sha512(), hashlib.md5()  # noqa: S324 - Glance's checksum field
    with open(path, "wb") as f:
        left = size
        while left:
            block = os.urandom(min(4 * MIB, left))
            f.write(block)
            digest.update(block)
            md5.update(block)
            left -= len(block)
    return {"status": "active", "disk_format": "raw", "container_format": "bare",
            "size": size, "checksum": md5.hexdigest(), "os_hash_algo": "sha512",
            "os_hash_value": digest.hexdigest(), "visibility": "shared"}


class _OriginState:
    def __init__(self, files: dict[str, tuple[str, dict[str, Any]]], groups: int,
                 group_of_address: dict[str, int], rate: float | None) -> None:
        from fleetcache.compute.imagecache.bandwidth import TokenBucket

        #: kind -> (path, meta): the image's bytes, and a small one to warm up with.
        self.files = files
        #: image id -> kind.
        self.images: dict[str, str] = {}
        self.group_of_address = group_of_address
        self.body_bytes = [0] * groups
        #: Body bytes written into a socket that its TCP never sent (a receiver died).
        self.unsent_bytes = [0] * groups
        self.file_gets = [0] * groups
        self.lock = threading.Lock()
        self.buckets = [TokenBucket(rate, burst=CHUNK) if rate else None
                        for _ in range(groups)]


def _origin_handler(state: _OriginState) -> type[BaseHTTPRequestHandler]:
    route = re.compile(r"^/v2/images/([0-9a-f-]{36})(/file)?$")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            self.wfile = _CountingWriter(self.wfile)  # type: ignore[assignment]

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            match = route.match(self.path)
            if match is None or match.group(1) not in state.images:
                self._send(404, b"{}")
                return
            image_id = match.group(1)
            path, meta = state.files[state.images[image_id]]
            if not match.group(2):
                self._send(200, json.dumps({**meta, "id": image_id, "name": image_id}).encode())
                return
            group = getattr(self.server, "group", None)
            if group is None:
                group = state.group_of_address[self.connection.getsockname()[0]]
            size = int(meta["size"])
            start = 0
            rng = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
            if rng:
                start = int(rng.group(1))
            self.send_response(206 if start else 200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
            self.end_headers()
            with state.lock:
                state.file_gets[group] += 1
            bucket = state.buckets[group]
            before_body = self.wfile.written  # type: ignore[attr-defined]
            fd = os.open(path, os.O_RDONLY)
            offset = start
            data = b""
            try:
                while offset < size:
                    data = os.pread(fd, min(CHUNK, size - offset), offset)
                    if bucket is not None:
                        bucket.take(len(data))
                    self.wfile.write(data)
                    offset += len(data)
                    with state.lock:
                        state.body_bytes[group] += len(data)
            except OSError:
                self._count_cut(group, before_body, offset - start, len(data))
                raise
            finally:
                os.close(fd)

        def _count_cut(self, group: int, before_body: int, written: int, failed: int) -> None:
            """Count a body cut short (its receiver gone) by what its TCP sent: ``written``
            bytes were logged, and part of the ``failed`` write may have gone out. TCP sends
            a connection's bytes in order, so the body's on the wire are those sent after
            the ``before_body`` bytes written ahead of it (headers, earlier responses);
            after the reset nothing more goes out."""
            sent = min(max(unique_bytes_sent(self.connection) - before_body, 0),
                       written + failed)
            with state.lock:
                state.body_bytes[group] += sent - written
                state.unsent_bytes[group] += written + failed - sent

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that left mid-body


def origin_main(netns: str | None, conn: multiprocessing.connection.Connection,
                spec: dict[str, Any]) -> None:
    """The origin process: serve until told to stop; answer ``add`` and ``stats``."""
    enter_netns(netns)
    state = _OriginState(spec["files"], spec["groups"], spec["group_of_address"],
                         spec["rate"])
    servers = []
    if spec["ports"]:  # Tier B: a port (and a bucket) per group
        for g, port in enumerate(spec["ports"]):
            server = _Server(("127.0.0.1", port), _origin_handler(state))
            server.group = g  # type: ignore[attr-defined]
            servers.append(server)
    else:
        servers.append(_Server(("0.0.0.0", ORIGIN_PORT), _origin_handler(state)))
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    conn.send("ready")
    while True:
        cmd, arg = conn.recv()
        if cmd == "add":
            image_id, kind = arg
            state.images[image_id] = kind
            conn.send(None)
        elif cmd == "stats":
            with state.lock:
                conn.send({"body_bytes": list(state.body_bytes),
                           "unsent_bytes": list(state.unsent_bytes),
                           "file_gets": list(state.file_gets)})
        else:
            break
    for server in servers:
        server.shutdown()
