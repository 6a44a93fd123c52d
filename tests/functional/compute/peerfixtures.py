"""What the peer-distribution functional tests share: a compute's configuration on
127.0.0.1 with a small read chunk and a short stall timeout, and an image in the local
image source they fetch from, a running image server, and a way to keep all its workers
busy."""

from __future__ import annotations

import contextlib
import io
import pathlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

from oslo_config import cfg

from fleetcache.compute.imagecache import ImageCache
from fleetcache.compute.peers import PeerServer, ServeGrants
from fleetcache.image.local import add_image
from fleetcache.image.source import ImageMeta
from tests.unit.image.fixtures import make_conf

#: The read chunk (``[glance] download_chunk_size``): many chunks per test image.
CHUNK = 64 * 1024


def peer_conf(tmp_path: pathlib.Path, host: str, **overrides: Any) -> cfg.ConfigOpts:
    """``host``'s configuration: its cache under ``tmp_path/host``, the shared local image
    source, an image server on 127.0.0.1 (any port), ``peer_stall_timeout`` 1 s, unless
    ``overrides`` say otherwise."""
    options: dict[str, Any] = {"image_cache__peer_listen_address": "127.0.0.1",
                               "image_cache__peer_listen_port": 0,
                               "image_cache__peer_stall_timeout": 1, **overrides}
    return make_conf(host=host, instances_path=str(tmp_path / host),
                     image_source__local_directory=str(tmp_path / "images"),
                     glance__download_chunk_size=CHUNK, **options)


def local_image(tmp_path: pathlib.Path, data: bytes) -> ImageMeta:
    """``data`` as an image of the local image source of :func:`peer_conf`."""
    return add_image(str(tmp_path / "images"), io.BytesIO(data))


@contextlib.contextmanager
def running_server(cache: ImageCache, grants: ServeGrants, **kw: Any) -> Iterator[PeerServer]:
    """A started :class:`PeerServer` of ``cache``, stopped after the block."""
    server = PeerServer(cache.conf, cache, grants, **kw)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def requests_held(server: PeerServer) -> Iterator[None]:
    """Every request a worker of ``server`` takes up during the block waits there, unanswered,
    until the block ends: how a test keeps the whole pool busy (``server.serve_connection``
    is the listener's one call into the server for a request)."""
    release = threading.Event()

    def hold(sock: socket.socket, remote: str, head: bytes) -> None:
        release.wait(10)

    server.serve_connection = hold  # type: ignore[method-assign]
    try:
        yield
    finally:
        release.set()
        del server.serve_connection  # the class's again
