"""Peer distribution on real sockets: a real :class:`PeerServer` on 127.0.0.1 serving a real
image cache, a real receiving :class:`ImageCache` (metadata and origin bytes from a local
image source), and small HTTP test doubles for peers that misbehave."""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import os
import pathlib
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.common.peer_tokens import PeerClaims, mint, new_key
from fleetcache.compute.imagecache import (
    DownloadPaused,
    DownloadTerms,
    ImageCache,
    PeerBytesRefused,
)
from fleetcache.compute.imagecache.paused import kept_bytes
from fleetcache.compute.manager import ComputeManager
from fleetcache.compute.peers import Peer, PeerServer, ServeGrants
from fleetcache.compute.peers.http_wire import NOT_CACHED_HEADER
from fleetcache.compute.peers.inflight import EXPECTED
from fleetcache.compute.peers.server import SPARE_WORKERS
from fleetcache.compute.virt.disk import DiskDriver
from fleetcache.image.local import LocalImageSource, add_image
from fleetcache.image.source import ImageMeta, ProgressCallback, Writer
from tests import hostile_images as corpus
from tests.functional.compute.peerfixtures import (
    CHUNK,
    local_image,
    peer_conf,
    requests_held,
    running_server,
)
from tests.unit.compute.diskfixtures import disk_is_full
from tests.unit.image.fixtures import buffers_cannot_be_mapped, hanging_qemu_img
from tests.waiting import wait_for

CTXT = RequestContext()
DATA = os.urandom(16 * CHUNK + 5)
JOB = str(uuid.uuid4())


class OriginSource(LocalImageSource):
    """The image service of the test: the local source, recording each download's offset."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        super().__init__(conf)
        self.offsets: list[int] = []

    def download_from(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                      offset: int, progress: ProgressCallback | None = None) -> int:
        self.offsets.append(offset)
        return super().download_from(ctxt, meta, writer, offset, progress)


@pytest.fixture
def image(tmp_path: pathlib.Path) -> ImageMeta:
    return local_image(tmp_path, DATA)


@pytest.fixture
def source_cache(tmp_path: pathlib.Path, image: ImageMeta) -> ImageCache:
    """compute-a's cache, holding ``image``."""
    conf = peer_conf(tmp_path, "compute-a")
    cache = ImageCache(conf, LocalImageSource(conf))
    assert cache.fetch(CTXT, image.id).downloaded
    return cache


@pytest.fixture
def grants(image: ImageMeta) -> ServeGrants:
    grants = ServeGrants()
    grants.open(JOB, KEY, [image.id], time.time() + 600)
    return grants


KEY = new_key()


@pytest.fixture
def server(source_cache: ImageCache, grants: ServeGrants) -> Iterator[PeerServer]:
    with running_server(source_cache, grants) as running:
        yield running


@pytest.fixture
def receiver(tmp_path: pathlib.Path) -> ImageCache:
    conf = peer_conf(tmp_path, "compute-b")
    return ImageCache(conf, OriginSource(conf))


def _auth(image_id: str, *, job: str = JOB, key: str = KEY, server: str = "compute-a",
          ip: str | None = "127.0.0.1", ttl: float = 60) -> str:
    return mint(key, PeerClaims(job=job, image_id=image_id, requester="compute-b",
                                requester_ip=ip, server=server, expires=time.time() + ttl))


def _peer(server: PeerServer | Double, image_id: str, host: str = "compute-a",
          not_cached_header: bool = True) -> Peer:
    """``server`` as the conductor names it to a receiver; ``not_cached_header`` False: a
    source that did not report that it marks its not-cached 404s (an older compute)."""
    peer = Peer(host=host, url=server.url, authorization=_auth(image_id))
    if not_cached_header:
        peer["not_cached_header"] = True
    return peer


def _origin(cache: ImageCache) -> OriginSource:
    assert isinstance(cache.source, OriginSource)
    return cache.source


def _published(cache: ImageCache, image_id: str) -> bytes:
    assert not cache.partial_files()
    return pathlib.Path(cache.path_for(image_id)).read_bytes()


class Double:
    """A peer that misbehaves as told: ``flip`` one byte, ``die`` or ``stall`` after ``cut``
    bytes, answer 503 (``busy``), or do so only the first time it is asked (``stall-once``,
    ``busy-once``), else serve honestly (with Range). Records the ``Range`` header of each
    request."""

    def __init__(self, mode: str = "honest", cut: int = 0) -> None:
        self.mode, self.cut = mode, cut
        self.ranges: list[str | None] = []
        self.release = threading.Event()
        double = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                double.ranges.append(self.headers.get("Range"))
                double.answer(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def answer(self, h: http.server.BaseHTTPRequestHandler) -> None:
        mode = self.mode
        if mode.endswith("-once"):
            mode = mode.removesuffix("-once") if len(self.ranges) == 1 else "honest"
        if mode == "busy":
            h.send_response(503)
            h.send_header("Retry-After", "1")
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        body, first = bytearray(DATA if mode != "other" else DATA[:-1]), 0
        if mode.startswith("flip"):
            body[len(body) // 2] ^= 0x01
        if mode == "missing":  # its copy was aged out: the image server's answer
            h.send_response(404)
            h.send_header(NOT_CACHED_HEADER, h.path.rsplit("/", 1)[-1])
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if mode == "elsewhere":  # another HTTP service at the peer's URL
            h.send_error(404)
            return
        rng = h.headers.get("Range")
        if rng:
            first = int(rng.split("=")[1].rstrip("-"))
            h.send_response(206)
            h.send_header("Content-Range", f"bytes {first}-{len(body) - 1}/{len(body)}")
        else:
            h.send_response(200)
        h.send_header("Content-Length", str(len(body) - first))
        h.end_headers()
        if mode in ("die", "stall", "flip-die"):
            h.wfile.write(body[first:self.cut])
            h.wfile.flush()
            if mode == "stall":
                self.release.wait(10)
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        h.wfile.write(body[first:])

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def doubles() -> Iterator[list[Double]]:
    made: list[Double] = []
    yield made
    for double in made:
        double.stop()


def _raw(server: PeerServer, request: bytes) -> bytes:
    """Send ``request`` as it is (no client normalises its path) and read the answer."""
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


# -- fetching from peers -----------------------------------------------------------------


def test_a_peer_fetch_verifies_and_publishes(server: PeerServer, receiver: ImageCache,
                                             image: ImageMeta) -> None:
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(server, image.id)])
    assert (outcome.downloaded, outcome.download_path, outcome.source_host) == (
        True, "peer", "compute-a")
    assert (outcome.bytes_from_peers, outcome.bytes_from_origin) == (len(DATA), 0)
    assert outcome.peer_fallback is None and outcome.bad_peers == ()
    assert _origin(receiver).offsets == []
    assert _published(receiver, image.id) == DATA
    assert receiver.servable(image.id) == receiver.path_for(image.id)  # a source in turn
    assert server.responses == {200: 1}


def test_flipped_bytes_from_a_peer_are_never_published(
        receiver: ImageCache, image: ImageMeta, doubles: list[Double]) -> None:
    doubles.append(evil := Double("flip"))
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(evil, image.id, "evil")])
    assert outcome.bad_peers == ("evil",)
    assert outcome.peer_fallback == "hash_mismatch: evil"
    assert outcome.download_path == "http"
    assert (outcome.bytes_from_peers, outcome.bytes_from_origin) == (len(DATA), len(DATA))
    assert _origin(receiver).offsets == [0]  # the origin from byte 0
    assert _published(receiver, image.id) == DATA


def test_a_peer_dying_mid_transfer_hands_over_with_range(
        receiver: ImageCache, image: ImageMeta, doubles: list[Double]) -> None:
    cut = 5 * CHUNK + 123
    doubles.extend([dying := Double("die", cut), honest := Double()])
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(dying, image.id, "dying"),
                                                    _peer(honest, image.id, "honest")])
    assert honest.ranges and honest.ranges[0] is not None
    resumed_at = int(honest.ranges[0].split("=")[1].rstrip("-"))
    assert cut - CHUNK <= resumed_at <= cut
    assert outcome.bytes_from_peers - len(DATA) <= CHUNK  # re-fetched: at most one chunk
    assert (outcome.download_path, outcome.source_host) == ("peer", "honest")
    assert _origin(receiver).offsets == []
    assert _published(receiver, image.id) == DATA


def test_a_peer_without_the_image_is_skipped(server: PeerServer, receiver: ImageCache,
                                             image: ImageMeta, doubles: list[Double]) -> None:
    doubles.append(aged := Double("missing"))
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(aged, image.id, "aged"),
                                                    _peer(server, image.id)])
    assert (outcome.download_path, outcome.source_host) == ("peer", "compute-a")
    assert outcome.peer_fallback is None and outcome.bytes_from_peers == len(DATA)
    assert outcome.absent_peers == ("aged",)  # the conductor drops it for this image only
    assert server.responses == {200: 1}
    assert _published(receiver, image.id) == DATA


@pytest.mark.parametrize(("not_cached_header", "absent"), [
    (True, ()),  # failed: the conductor sets "other" aside for the job
    (False, ("other",)),  # an older source, whose every 404 says it lacks the image
])
def test_a_404_from_another_service_fails_a_peer_that_marks_its_404s(
        server: PeerServer, receiver: ImageCache, image: ImageMeta, doubles: list[Double],
        not_cached_header: bool, absent: tuple[str, ...]) -> None:
    """A peer URL that reaches some other HTTP service answers 404 too, without the image
    server's header: a peer that reported sending that header is then failed (the job
    stops using it), not absent."""
    doubles.append(other := Double("elsewhere"))
    outcome = receiver.fetch(CTXT, image.id, peers=[
        _peer(other, image.id, "other", not_cached_header), _peer(server, image.id)])
    assert (outcome.download_path, outcome.source_host) == ("peer", "compute-a")
    assert outcome.absent_peers == absent
    assert _published(receiver, image.id) == DATA


def test_a_peer_serving_another_size_is_left_before_a_byte_is_written(
        receiver: ImageCache, image: ImageMeta, doubles: list[Double]) -> None:
    doubles.extend([other := Double("other"), honest := Double()])
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(other, image.id, "other"),
                                                    _peer(honest, image.id, "honest")])
    assert honest.ranges == [None]  # from byte 0: nothing of the other size was kept
    assert (outcome.source_host, outcome.bytes_from_peers, outcome.bad_peers) == (
        "honest", len(DATA), ())
    assert _published(receiver, image.id) == DATA


def test_a_stalled_peer_is_left_for_the_real_server_resuming(
        server: PeerServer, receiver: ImageCache, image: ImageMeta,
        doubles: list[Double]) -> None:
    doubles.append(stalled := Double("stall", 3 * CHUNK))
    started = time.monotonic()
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(stalled, image.id, "stalled"),
                                                    _peer(server, image.id)])
    assert time.monotonic() - started < 5  # peer_stall_timeout = 1
    assert (outcome.download_path, outcome.source_host) == ("peer", "compute-a")
    assert server.responses == {206: 1}
    assert _published(receiver, image.id) == DATA


def test_a_busy_peer_is_asked_again_after_its_retry_after(
        receiver: ImageCache, image: ImageMeta, doubles: list[Double]) -> None:
    doubles.append(busy := Double("busy-once"))
    started = time.monotonic()
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(busy, image.id, "busy")])
    assert time.monotonic() - started >= 1  # its Retry-After
    assert busy.ranges == [None, None]
    assert (outcome.download_path, outcome.source_host, outcome.bytes_from_origin) == (
        "peer", "busy", 0)
    assert _origin(receiver).offsets == []
    assert _published(receiver, image.id) == DATA


def test_a_stalled_peer_that_comes_back_is_waited_for_not_the_origin(
        receiver: ImageCache, image: ImageMeta, doubles: list[Double]) -> None:
    doubles.append(stalled := Double("stall-once", 3 * CHUNK))
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(stalled, image.id, "stalled")])
    assert len(stalled.ranges) == 2 and stalled.ranges[0] is None
    resumed_at = int(str(stalled.ranges[1]).split("=")[1].rstrip("-"))
    assert 2 * CHUNK <= resumed_at <= 3 * CHUNK
    assert (outcome.download_path, outcome.bytes_from_origin) == ("peer", 0)
    assert outcome.bytes_from_peers - len(DATA) <= CHUNK
    assert _origin(receiver).offsets == []
    assert _published(receiver, image.id) == DATA


def test_a_peer_busy_for_longer_than_the_wait_is_given_up_for_the_origin(
        tmp_path: pathlib.Path, image: ImageMeta, doubles: list[Double]) -> None:
    conf = peer_conf(tmp_path, "compute-b", image_cache__peer_wait_timeout=2)
    receiver = ImageCache(conf, OriginSource(conf))
    doubles.append(busy := Double("busy"))
    started = time.monotonic()
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(busy, image.id, "busy")])
    waited = time.monotonic() - started
    assert 2 <= waited < 4 and 2 <= len(busy.ranges) <= 4
    assert outcome.download_path == "http" and _origin(receiver).offsets == [0]
    assert outcome.peer_fallback == "peer_failed: busy: HTTP 503"
    assert _published(receiver, image.id) == DATA


def test_a_peer_refusing_connections_is_given_up_at_once(
        receiver: ImageCache, image: ImageMeta) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    started = time.monotonic()
    outcome = receiver.fetch(CTXT, image.id, peers=[Peer(host="dead", url=dead,
                                                         authorization=_auth(image.id))])
    assert time.monotonic() - started < 1  # not peer_wait_timeout (300 s)
    assert outcome.download_path == "http" and _origin(receiver).offsets == [0]
    assert str(outcome.peer_fallback).startswith("peer_failed: dead: cannot connect")
    assert _published(receiver, image.id) == DATA


def test_when_every_peer_fails_the_origin_resumes_at_the_bytes_written(
        receiver: ImageCache, image: ImageMeta, doubles: list[Double]) -> None:
    doubles.append(dying := Double("die", 4 * CHUNK))
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(dying, image.id, "dying")])
    assert len(dying.ranges) <= 3  # asked again while it sent bytes, not until the wait ends
    [offset] = _origin(receiver).offsets
    assert 3 * CHUNK <= offset <= 4 * CHUNK
    assert outcome.download_path == "http"
    assert outcome.peer_fallback is not None
    assert outcome.peer_fallback.startswith("peer_failed: dying: ")
    assert (outcome.bytes_from_peers, outcome.bytes_from_origin) == (
        offset, len(DATA) - offset)
    assert _published(receiver, image.id) == DATA


def test_bad_peer_bytes_under_an_origin_resume_restart_from_byte_0(
        receiver: ImageCache, image: ImageMeta, doubles: list[Double]) -> None:
    doubles.append(evil := Double("flip-die", 10 * CHUNK))  # flips byte 8 * CHUNK, then dies
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(evil, image.id, "evil")])
    offsets = _origin(receiver).offsets
    assert len(offsets) == 2 and offsets[0] > 8 * CHUNK and offsets[1] == 0
    assert (outcome.bad_peers, outcome.peer_fallback) == (("evil",), "hash_mismatch: evil")
    assert outcome.bytes_from_origin == len(DATA) - offsets[0] + len(DATA)
    assert _published(receiver, image.id) == DATA


def test_an_md5_only_image_is_never_taken_from_peers(
        tmp_path: pathlib.Path, receiver: ImageCache, doubles: list[Double]) -> None:
    meta = add_image(str(tmp_path / "images"), io.BytesIO(DATA))
    meta_file = tmp_path / "images" / f"{meta.id}.json"
    body = json.loads(meta_file.read_text())
    body.update(os_hash_algo=None, os_hash_value=None)
    meta_file.write_text(json.dumps(body))
    doubles.append(peer := Double())
    outcome = receiver.fetch(CTXT, meta.id, peers=[_peer(peer, meta.id)])
    assert peer.ranges == []
    assert (outcome.download_path, outcome.peer_fallback) == ("http", "no_multihash")
    assert _published(receiver, meta.id) == DATA


# -- what the server refuses ---------------------------------------------------------------


def _get(server: PeerServer, image_id: str, auth: str | None,
         **headers: str) -> requests.Response:
    if auth is not None:
        headers["Authorization"] = auth
    return requests.get(f"{server.url}/v1/images/{image_id}", headers=headers, timeout=5)


def test_tokens_for_another_job_image_server_time_or_address_are_refused(
        server: PeerServer, image: ImageMeta, grants: ServeGrants) -> None:
    other = str(uuid.uuid4())
    grants.open(JOB, KEY, [], time.time() + 600)
    cases = [
        (None, 401, "malformed"),
        (_auth(image.id, key=new_key()), 401, "bad_signature"),
        (_auth(image.id, job=str(uuid.uuid4())), 401, "unknown_job"),
        (_auth(image.id, ttl=-1), 401, "expired"),
        (_auth(other), 403, "wrong_image"),
        (_auth(image.id, server="compute-z"), 403, "wrong_server"),
        (_auth(image.id, ip="10.9.9.9"), 403, "wrong_address"),
    ]
    for auth, status, reason in cases:
        resp = _get(server, image.id, auth)
        assert (resp.status_code, resp.content) == (status, b""), reason
        assert server.denied[reason] == 1, reason
    assert _get(server, image.id, None).headers["WWW-Authenticate"] == "FleetcachePeer"
    resp = _get(server, other, _auth(other))
    assert (resp.status_code, server.denied["not_granted"]) == (403, 1)
    assert 200 not in server.responses


def test_a_receiver_asks_from_its_own_image_servers_address(
        tmp_path: pathlib.Path, server: PeerServer, image: ImageMeta) -> None:
    # compute-b's image server is on a second address (127.0.0.2), not the one the route to
    # compute-a leaves from (127.0.0.1): the credential names its server's address, and the
    # check of the source address passes only if its request comes from there.
    conf = peer_conf(tmp_path, "compute-b", image_cache__peer_listen_address="127.0.0.2")
    receiver = ImageCache(conf, OriginSource(conf))
    peer = Peer(host="compute-a", url=server.url, authorization=_auth(image.id, ip="127.0.0.2"))
    outcome = receiver.fetch(CTXT, image.id, peers=[peer])
    assert (outcome.download_path, outcome.bytes_from_origin) == ("peer", 0)
    assert server.denied == {} and server.responses == {200: 1}


def test_the_bound_address_is_the_listen_address_resolved(
        tmp_path: pathlib.Path, grants: ServeGrants) -> None:
    conf = peer_conf(tmp_path, "compute-c", image_cache__peer_listen_address="localhost")
    with running_server(ImageCache(conf, OriginSource(conf)), grants) as named:
        assert named.address == "localhost" and named.bound_address == "127.0.0.1"


def test_only_the_route_with_a_uuid_is_served(server: PeerServer, image: ImageMeta) -> None:
    auth = _auth(image.id).encode()
    for path in (b"/v1/images/../../etc/passwd", b"/v1/images/..%2F..%2Fetc%2Fpasswd",
                 b"/etc/passwd", b"/v1/images/not-a-uuid", b"/v1/images/" + image.id.encode()
                 + b"/../x", b"/v1/images/" + image.id.encode() + b"?x=1", b"/v1/images/"):
        answer = _raw(server, b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nAuthorization: "
                      + auth + b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 404 "), path
        assert answer.endswith(b"\r\n\r\n"), path  # no body
        assert NOT_CACHED_HEADER.encode() not in answer, path  # not "absent": a wrong route
    answer = _raw(server, b"POST /v1/images/" + image.id.encode() + b" HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 405 ") and b"Allow: GET, HEAD" in answer
    assert _raw(server, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")


def test_ranges_head_and_content_type(server: PeerServer, image: ImageMeta) -> None:
    resp = _get(server, image.id, _auth(image.id), Range="bytes=10-19")
    assert (resp.status_code, resp.content) == (206, DATA[10:20])
    assert resp.headers["Content-Range"] == f"bytes 10-19/{len(DATA)}"
    assert resp.headers["Content-Type"] == "application/octet-stream"
    for bad in ("bytes=0-1,5-6", f"bytes={len(DATA)}-"):
        resp = _get(server, image.id, _auth(image.id), Range=bad)
        assert (resp.status_code, resp.content) == (416, b"")
        assert resp.headers["Content-Range"] == f"bytes */{len(DATA)}"
    head = requests.head(f"{server.url}/v1/images/{image.id}",
                         headers={"Authorization": _auth(image.id)}, timeout=5)
    assert (head.status_code, head.headers["Content-Length"]) == (200, str(len(DATA)))


def test_a_symlink_in_the_cache_is_not_followed(
        server: PeerServer, source_cache: ImageCache, grants: ServeGrants,
        tmp_path: pathlib.Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"not an image")
    linked = str(uuid.uuid4())
    os.symlink(secret, source_cache.path_for(linked))
    source_cache.index.record(linked, "raw", "raw")
    grants.open(JOB, KEY, [linked], time.time() + 600)
    resp = _get(server, linked, _auth(linked))
    assert (resp.status_code, resp.content) == (404, b"")
    assert server.denied["not_cached"] == 1


def test_a_converted_base_is_not_served(server: PeerServer, source_cache: ImageCache,
                                        image: ImageMeta) -> None:
    source_cache.index.record(image.id, "qcow2", "raw")
    assert source_cache.servable(image.id) is None
    resp = _get(server, image.id, _auth(image.id))
    assert (resp.status_code, resp.content) == (404, b"")
    assert resp.headers[NOT_CACHED_HEADER] == image.id  # the receiver reads it as absent


def test_uploads_beyond_the_limit_get_503_with_retry_after(
        tmp_path: pathlib.Path, image: ImageMeta, grants: ServeGrants) -> None:
    conf = peer_conf(tmp_path, "compute-c", image_cache__peer_max_uploads=1,
                 image_cache__max_upload_bytes_per_second=4 * CHUNK)
    cache = ImageCache(conf, LocalImageSource(conf))
    cache.fetch(CTXT, image.id)
    with running_server(cache, grants) as server:
        url = f"{server.url}/v1/images/{image.id}"
        auth = _auth(image.id, server="compute-c")
        with requests.get(url, headers={"Authorization": auth}, stream=True,
                          timeout=5) as first:
            assert first.status_code == 200
            first.raw.read(CHUNK)  # the upload is under way, throttled
            second = requests.get(url, headers={"Authorization": auth}, timeout=5)
            assert (second.status_code, second.headers["Retry-After"]) == (503, "1")
        assert server.responses[503] == 1
        with requests.get(url, headers={"Authorization": auth}, stream=True,
                          timeout=5) as upload:
            got = len(upload.raw.read(CHUNK))
            started = time.monotonic()
            server.stop()  # ends the upload under way
            assert time.monotonic() - started < 2
            with contextlib.suppress(Exception):  # the body was cut short
                got += len(upload.raw.read())
            assert got < len(DATA)


@pytest.mark.parametrize("origin_after_failed_peers", [False, True])
def test_a_conversion_that_fails_after_peers_blames_no_peer_and_asks_no_origin(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
        origin_after_failed_peers: bool) -> None:
    """The peer's qcow2 bytes verify, then this host's ``qemu-img convert`` (to raw, for its
    flat backend) does not finish within ``images_convert_timeout``: this host's failure,
    as in the test above; the holder keeps and serves the qcow2 as it is."""
    qcow2 = add_image(str(tmp_path / "images"), str(corpus.qcow2_with_data(tmp_path)),
                      disk_format="qcow2")
    holder_conf = peer_conf(tmp_path, "compute-a", force_raw_images=False)
    holder = ImageCache(holder_conf, LocalImageSource(holder_conf))
    assert holder.fetch(CTXT, qcow2.id).downloaded and holder.servable(qcow2.id)
    grants = ServeGrants()
    grants.open(JOB, KEY, [qcow2.id], time.time() + 600)
    conf = peer_conf(tmp_path, "compute-c", libvirt__images_type="flat",
                     libvirt__images_convert_timeout=1)
    driver = DiskDriver(conf, OriginSource(conf))
    driver.init_host("compute-c")
    manager, cache = ComputeManager(conf, driver), driver.image_cache
    assert cache is not None and isinstance(cache.source, OriginSource)

    hanging_qemu_img(tmp_path, monkeypatch, "convert")
    with running_server(holder, grants) as server:
        result = manager.cache_images(
            CTXT, [qcow2.id], peers={qcow2.id: [_peer(server, qcow2.id)]},
            origin_after_failed_peers=origin_after_failed_peers)[qcow2.id]
    assert result["state"] == "error"
    assert re.search(r"cannot convert it from qcow2 to raw for the flat backend: .*time "
                     r"limit of 1 s", str(result["reason"]))
    assert not result.get("failed_peers") and not result.get("fallback_reason")
    assert cache.source.offsets == [] and not cache.partial_files()
    assert not os.path.exists(cache.path_for(qcow2.id))


def test_stopping_the_server_ends_an_upload_waiting_for_its_cap(
        tmp_path: pathlib.Path, image: ImageMeta, grants: ServeGrants) -> None:
    # At 8 KiB a second, the upload's first 256 KiB send waits 31 s for its tokens.
    conf = peer_conf(tmp_path, "compute-c",
                     image_cache__max_upload_bytes_per_second=CHUNK // 8)
    cache = ImageCache(conf, LocalImageSource(conf))
    cache.fetch(CTXT, image.id)
    with running_server(cache, grants) as server:
        url = f"{server.url}/v1/images/{image.id}"
        with requests.get(url, headers={"Authorization": _auth(image.id, server="compute-c")},
                          stream=True, timeout=5) as upload:
            assert upload.status_code == 200
            started = time.monotonic()
            server.stop()
            assert time.monotonic() - started < 5
            got = 0
            with contextlib.suppress(Exception):  # the body was cut short
                got = len(upload.raw.read())
            assert got < len(DATA)
        assert server.responses[200] == 1


def test_requests_beyond_every_worker_get_503_at_once(
        tmp_path: pathlib.Path, image: ImageMeta, grants: ServeGrants) -> None:
    conf = peer_conf(tmp_path, "compute-c", image_cache__peer_max_uploads=1)
    cache = ImageCache(conf, LocalImageSource(conf))
    cache.fetch(CTXT, image.id)
    with running_server(cache, grants, header_timeout=5) as server, requests_held(server):
        port = int(server.url.rsplit(":", 1)[1])
        busy = [socket.create_connection(("127.0.0.1", port), timeout=5)
                for _ in range(1 + SPARE_WORKERS)]
        try:
            for sock in busy:
                sock.sendall(f"GET /v1/images/{image.id} HTTP/1.1\r\n\r\n".encode())
            wait_for(lambda: server.active_connections == len(busy), "every worker busy", 5)
            started = time.monotonic()
            resp = _get(server, image.id, _auth(image.id, server="compute-c"))
            assert (resp.status_code, resp.headers["Retry-After"]) == (503, "1")
            assert time.monotonic() - started < 1
        finally:
            for sock in busy:
                sock.close()


def test_connections_that_send_nothing_hold_no_worker(
        source_cache: ImageCache, grants: ServeGrants, image: ImageMeta) -> None:
    with running_server(source_cache, grants, header_timeout=5) as server:
        port = int(server.url.rsplit(":", 1)[1])
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5)
                for _ in range(4 * (server.max_uploads + SPARE_WORKERS))]
        try:
            wait_for(lambda: server.waiting_connections == len(idle), "all at the door", 5)
            assert server.active_connections == 0
            started = time.monotonic()
            resp = _get(server, image.id, _auth(image.id))
            assert (resp.status_code, resp.content) == (200, DATA)
            assert time.monotonic() - started < 1
        finally:
            for sock in idle:
                sock.close()


def test_an_address_that_cannot_be_bound_is_a_configuration_error(
        source_cache: ImageCache, grants: ServeGrants) -> None:
    source_cache.conf.set_override("peer_listen_address", "192.0.2.1", group="image_cache")
    server = PeerServer(source_cache.conf, source_cache, grants)
    with pytest.raises(exception.InvalidConfiguration, match="peer_listen_address"):
        server.start()
    server.stop()  # a server that never started stops quietly


def test_a_client_trickling_headers_holds_no_worker_past_the_header_timeout(
        source_cache: ImageCache, grants: ServeGrants, image: ImageMeta) -> None:
    with running_server(source_cache, grants, header_timeout=0.5) as server:
        port = int(server.url.rsplit(":", 1)[1])
        slow = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(8)]
        started, still_open = time.monotonic(), list(slow)
        try:
            # A byte each 0.1 s: every read succeeds, the head never ends; only a deadline
            # on the whole head closes these connections.
            while still_open and time.monotonic() - started < 3:
                for sock in still_open:
                    with contextlib.suppress(OSError):  # closed by the server already
                        sock.sendall(b"G")
                time.sleep(0.1)
                still_open = [s for s in still_open if not _closed(s)]
            assert not still_open and time.monotonic() - started < 1.5
        finally:
            for sock in slow:
                sock.close()
        resp = _get(server, image.id, _auth(image.id))
        assert (resp.status_code, resp.content) == (200, DATA)


def _closed(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1024) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


def test_refused_peer_bytes_are_left_to_the_conductor_when_the_call_says_so(
        tmp_path: pathlib.Path, receiver: ImageCache, image: ImageMeta,
        doubles: list[Double]) -> None:
    """RPC 1.6: the call's terms leave the next source to the conductor: the bytes are
    dropped, the image service is not asked, and the compute's result names the liar, and
    the peer asked before it that lacked the image (so that neither is named again)."""
    doubles.extend([aged := Double("missing"), evil := Double("flip")])
    peers = [_peer(aged, image.id, "aged"), _peer(evil, image.id, "evil")]
    with pytest.raises(PeerBytesRefused) as refused:
        receiver.fetch(CTXT, image.id, peers=peers,
                       terms=DownloadTerms(origin_after_refused_peers=False))
    assert (refused.value.bad_peers, refused.value.bytes_from_peers) == (("evil",), len(DATA))
    assert refused.value.absent_peers == ("aged",)
    assert _origin(receiver).offsets == []
    assert not os.path.exists(receiver.path_for(image.id)) and not receiver.partial_files()

    conf = peer_conf(tmp_path, "compute-c")
    driver = DiskDriver(conf, OriginSource(conf))
    driver.init_host("compute-c")
    manager = ComputeManager(conf, driver)
    result = manager.cache_images(CTXT, [image.id], peers={image.id: peers},
                                  origin_after_refused_peers=False)[image.id]
    assert (result["state"], result["fallback_reason"], result["bad_peers"]) == (
        "error", "hash_mismatch: evil", ["evil"])
    assert result["absent_peers"] == ["aged"]
    assert result["bytes_downloaded"] == result["bytes_from_peers"] == len(DATA)
    assert "bytes from peers evil refused" in str(result["reason"])
    assert isinstance(driver.image_cache.source, OriginSource)
    assert driver.image_cache.source.offsets == []

    # Before 1.6 (and by default) the compute fetches the image again from the image
    # service; its result counts both copies, so that what peers did not send is the origin's.
    again = manager.cache_images(CTXT, [image.id], peers={image.id: peers})[image.id]
    assert (again["state"], again["fallback_reason"], again["download_path"]) == (
        "cached", "hash_mismatch: evil", "http")
    assert (again["bytes_downloaded"], again["bytes_from_peers"]) == (2 * len(DATA), len(DATA))


def test_a_wait_for_busy_peers_pauses_at_the_calls_end_time(
        receiver: ImageCache, image: ImageMeta, doubles: list[Double]) -> None:
    doubles.append(busy := Double("busy"))
    started = time.monotonic()
    with pytest.raises(DownloadPaused):
        receiver.fetch(CTXT, image.id, peers=[_peer(busy, image.id, "busy")],
                       terms=DownloadTerms(until=time.time() + 0.5))
    assert time.monotonic() - started < 3  # not peer_wait_timeout (300 s)
    assert _origin(receiver).offsets == [] and not receiver.partial_files()


def test_a_pause_names_the_peers_that_lacked_the_image(
        tmp_path: pathlib.Path, receiver: ImageCache, image: ImageMeta,
        doubles: list[Double]) -> None:
    """The call's end time comes while the receiver waits for a busy peer, after another
    answered that it does not hold the image: the pause, and the compute's paused result,
    name that one, so that the job's run does not offer it for the image again."""
    doubles.extend([aged := Double("missing"), busy := Double("busy")])
    peers = [_peer(aged, image.id, "aged"), _peer(busy, image.id, "busy")]
    with pytest.raises(DownloadPaused) as paused:  # the busy peer never sends a byte
        receiver.fetch(CTXT, image.id, peers=peers,
                       terms=DownloadTerms(until=time.time() + 1.5))
    assert paused.value.absent_peers == ("aged",)
    assert _origin(receiver).offsets == [] and not receiver.partial_files()

    conf = peer_conf(tmp_path, "compute-c")
    driver = DiskDriver(conf, OriginSource(conf))
    driver.init_host("compute-c")
    result = ComputeManager(conf, driver).cache_images(
        CTXT, [image.id], peers={image.id: peers}, until=time.time() + 1.5)[image.id]
    assert (result["state"], result["absent_peers"]) == ("paused", ["aged"])


def test_a_pause_of_the_origin_after_absent_peers_names_them(
        receiver: ImageCache, image: ImageMeta, doubles: list[Double]) -> None:
    """The only peer lacks the image, so the origin is asked; the call's end time comes
    during that (paced) download: the pause still names the peer."""
    doubles.append(aged := Double("missing"))
    with pytest.raises(DownloadPaused) as paused:
        receiver.fetch(CTXT, image.id, peers=[_peer(aged, image.id, "aged")],
                       terms=DownloadTerms(until=time.time() + 2, bytes_per_second=CHUNK))
    assert paused.value.absent_peers == ("aged",)
    assert _origin(receiver).offsets == [0] and 0 < paused.value.kept < len(DATA)


def test_failed_peers_hand_the_image_back_with_its_bytes_kept_when_the_call_says_so(
        tmp_path: pathlib.Path, image: ImageMeta, doubles: list[Double]) -> None:
    """RPC 1.7: every peer failed, and the call's terms leave the next source to the
    conductor: the image service is not asked, the result names the peer, the bytes stay as
    the image's paused download (the image server asks this host's receivers to wait), and
    the next call, from the image service, resumes them with ``Range``."""
    doubles.append(dying := Double("die", 4 * CHUNK))
    conf = peer_conf(tmp_path, "compute-c")
    driver = DiskDriver(conf, OriginSource(conf))
    driver.init_host("compute-c")
    manager, cache = ComputeManager(conf, driver), driver.image_cache
    assert cache is not None and isinstance(cache.source, OriginSource)
    peers = [_peer(dying, image.id, "dying")]

    result = manager.cache_images(CTXT, [image.id], peers={image.id: peers},
                                  origin_after_failed_peers=False)[image.id]
    assert (result["state"], result["download_path"], result["failed_peers"]) == (
        "error", "peer", ["dying"])
    assert str(result["fallback_reason"]).startswith("peer_failed: dying: ")
    kept = result["bytes_downloaded"]
    assert 3 * CHUNK <= kept <= 4 * CHUNK and result["bytes_from_peers"] == kept
    assert cache.source.offsets == []
    assert kept_bytes(cache.paused_file(image.id)) == kept
    coming = cache.in_flight.get(image.id)
    assert coming is not None and coming.state == EXPECTED

    again = manager.cache_images(CTXT, [image.id])[image.id]
    assert (again["state"], again["download_path"]) == ("cached", "http")
    assert (again["bytes_resumed"], again["bytes_downloaded"]) == (kept, len(DATA) - kept)
    assert cache.source.offsets == [kept]
    assert _published(cache, image.id) == DATA


def test_a_peer_whose_base_was_converted_is_named_absent_not_failed(
        tmp_path: pathlib.Path, server: PeerServer, source_cache: ImageCache,
        image: ImageMeta) -> None:
    """A real image server whose base was converted (qcow2 -> raw: not the image's bytes)
    answers 404; the image given back (RPC 1.7) names that peer absent, so that the
    conductor stops naming it for this image only, and blames no peer."""
    source_cache.index.record(image.id, "qcow2", "raw")
    conf = peer_conf(tmp_path, "compute-c")
    driver = DiskDriver(conf, OriginSource(conf))
    driver.init_host("compute-c")
    manager, cache = ComputeManager(conf, driver), driver.image_cache
    assert cache is not None and isinstance(cache.source, OriginSource)

    result = manager.cache_images(CTXT, [image.id], peers={image.id: [_peer(server, image.id)]},
                                  origin_after_failed_peers=False)[image.id]

    assert (result["state"], result["failed_peers"], result.get("absent_peers")) == (
        "error", [], ["compute-a"])
    assert result["fallback_reason"] == (
        "peer_absent: compute-a: HTTP 404: the image is not cached there")
    assert server.denied["not_cached"] == 1 and cache.source.offsets == []


@pytest.mark.parametrize("origin_after_failed_peers", [False, True])
@pytest.mark.parametrize(("fault", "reason"), [
    (buffers_cannot_be_mapped, "this host is out of memory: cannot map a "),
    (disk_is_full, "cannot write .*No space left"),
])
def test_a_host_failure_blames_no_peer_and_asks_no_origin(
        tmp_path: pathlib.Path, server: PeerServer, image: ImageMeta,
        monkeypatch: pytest.MonkeyPatch, fault: Any, reason: str,
        origin_after_failed_peers: bool) -> None:
    """The download's buffers cannot be mapped (``ENOMEM``), or the peer's bytes come and
    this host's disk refuses them: the host's failure, which the image service's bytes would
    meet too: the image is an ``error`` saying so, the peer is not named failed, and the
    image service is not asked (whether or not the call leaves it the next source)."""
    conf = peer_conf(tmp_path, "compute-c")
    driver = DiskDriver(conf, OriginSource(conf))
    driver.init_host("compute-c")
    manager, cache = ComputeManager(conf, driver), driver.image_cache
    assert cache is not None and isinstance(cache.source, OriginSource)

    fault(monkeypatch)
    result = manager.cache_images(CTXT, [image.id], peers={image.id: [_peer(server, image.id)]},
                                  origin_after_failed_peers=origin_after_failed_peers)[image.id]
    assert result["state"] == "error"
    assert re.search(reason, str(result["reason"]))
    assert not result.get("failed_peers") and not result.get("fallback_reason")
    assert cache.source.offsets == [] and not cache.partial_files()
    assert not os.path.exists(cache.path_for(image.id))
