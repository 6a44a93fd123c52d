"""Cut-through on real sockets: a real :class:`PeerServer` streaming a download under way (a
file a writer thread appends to, or a real image cache fetching from a slow origin) to
plain HTTP clients and to a real receiving :class:`ImageCache`."""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
import requests

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.common.peer_tokens import PeerClaims, mint, new_key
from fleetcache.compute.imagecache import ImageCache
from fleetcache.compute.imagecache.download_paths import PeersGone
from fleetcache.compute.imagecache.layout import partial_prefix
from fleetcache.compute.peers import Peer, PeerServer, ServeGrants
from fleetcache.compute.peers.http_wire import NOT_CACHED_HEADER
from fleetcache.image.local import LocalImageSource
from fleetcache.image.source import ImageMeta, ProgressCallback, Writer
from tests.functional.compute.peerfixtures import CHUNK, local_image, peer_conf, running_server
from tests.waiting import wait_for

CTXT = RequestContext()
DATA = os.urandom(16 * CHUNK + 5)
JOB = str(uuid.uuid4())
KEY = new_key()
T = TypeVar("T")


class SlowOrigin(LocalImageSource):
    """The image service of the test, sending a chunk every ``pause`` seconds; with
    ``fail_at``, the transfer fails once that many bytes were sent and ``fail_when`` is set;
    with ``stall_at``, it sends nothing for ``stall_for`` seconds once that many were sent."""

    pause = 0.02
    fail_at: int | None = None
    fail_when = threading.Event()
    stall_at: int | None = None
    stall_for = 0.0

    def download_from(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                      offset: int, progress: ProgressCallback | None = None) -> int:
        origin = self

        class Slow:
            sent = offset

            def write(self, data: Any, /) -> int:
                if origin.fail_at is not None and self.sent >= origin.fail_at:
                    origin.fail_when.wait(10)
                    raise exception.ImageFetchError(image_id=meta.id, reason="origin died")
                if origin.stall_at is not None and self.sent >= origin.stall_at:
                    origin.stall_at = None
                    time.sleep(origin.stall_for)
                time.sleep(origin.pause)
                self.sent += len(data)
                return writer.write(data)

        return super().download_from(ctxt, meta, Slow(), offset, progress)


@pytest.fixture
def image(tmp_path: pathlib.Path) -> ImageMeta:
    return local_image(tmp_path, DATA)


@pytest.fixture
def source_cache(tmp_path: pathlib.Path) -> ImageCache:
    """compute-a's cache, empty, filled from a slow origin."""
    conf = peer_conf(tmp_path, "compute-a")
    cache = ImageCache(conf, SlowOrigin(conf))
    cache.ensure_dirs()
    return cache


@pytest.fixture
def server(source_cache: ImageCache, image: ImageMeta) -> Iterator[PeerServer]:
    grants = ServeGrants()
    grants.open(JOB, KEY, [image.id], time.time() + 600)
    running = PeerServer(source_cache.conf, source_cache, grants)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def _auth(image_id: str) -> str:
    return mint(KEY, PeerClaims(job=JOB, image_id=image_id, requester="compute-b",
                                requester_ip="127.0.0.1", server="compute-a",
                                expires=time.time() + 60))


def _get(server: PeerServer, image_id: str, **headers: str) -> requests.Response:
    headers["Authorization"] = _auth(image_id)
    return requests.get(f"{server.url}/v1/images/{image_id}", headers=headers, timeout=10)


def _raw_get(server: PeerServer, image_id: str) -> tuple[bytes, bytes]:
    """The head and the body of a GET, read to the connection's end (short or not)."""
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET /v1/images/{image_id} HTTP/1.1\r\nHost: x\r\nAuthorization: "
                     f"{_auth(image_id)}\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head, body


@contextlib.contextmanager
def _writing(cache: ImageCache, image: ImageMeta, upto: int = len(DATA), fail: bool = False,
             pause: float = 0.01, hold: threading.Event | None = None
             ) -> Iterator[threading.Thread]:
    """A download of ``image`` under way in ``cache`` (as the cache registers its fill): a
    thread appends DATA's first ``upto`` bytes to a partial file, then (once ``hold`` is
    set, if given) the download ends, failed when ``fail`` (its file removed, as the cache's
    pipeline does)."""
    path = pathlib.Path(cache.base_dir) / f"{partial_prefix(image.id)}test"
    done = threading.Event()

    def write() -> None:
        with open(path, "wb") as f:
            for i in range(0, upto, CHUNK):
                f.write(DATA[i:min(i + CHUNK, upto)])
                f.flush()
                time.sleep(pause)
        done.set()

    def run() -> None:
        with contextlib.suppress(RuntimeError), cache.in_flight.downloading(
                image.id, image.size, cache.base_dir, partial_prefix(image.id)):
            write()
            if hold is not None:
                hold.wait(10)
            if fail:
                path.unlink()
                raise RuntimeError("hash mismatch")
            os.replace(path, cache.path_for(image.id))
            cache.index.record(image.id, "raw", "raw")

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield thread
    finally:
        thread.join(10)


def test_a_download_under_way_is_streamed_whole_as_it_is_written(
        server: PeerServer, source_cache: ImageCache, image: ImageMeta) -> None:
    with _writing(source_cache, image):
        time.sleep(0.03)
        resp = _get(server, image.id)
        tail = _get(server, image.id, Range=f"bytes={len(DATA) - 10}-")
    assert (resp.status_code, resp.headers["Content-Length"]) == (200, str(len(DATA)))
    assert resp.content == DATA
    assert (tail.status_code, tail.content) == (206, DATA[-10:])  # beyond the written part
    assert tail.headers["Content-Range"] == f"bytes {len(DATA) - 10}-{len(DATA) - 1}/{len(DATA)}"
    assert server.responses == {200: 1, 206: 1}


def test_a_failed_download_ends_the_response_short(
        server: PeerServer, source_cache: ImageCache, image: ImageMeta) -> None:
    with _writing(source_cache, image, upto=5 * CHUNK, fail=True):
        time.sleep(0.03)
        head, body = _raw_get(server, image.id)
    assert head.startswith(b"HTTP/1.1 200 ") and f"Content-Length: {len(DATA)}".encode() in head
    assert body == DATA[:5 * CHUNK]
    resp = _get(server, image.id)  # the failed download is no source any more
    assert (resp.status_code, resp.content) == (404, b"")
    assert resp.headers[NOT_CACHED_HEADER] == image.id  # absent for this image, not failed


def _timed_while_stalled(cache: ImageCache, image: ImageMeta,
                         request: Callable[[], T]) -> tuple[T, float]:
    """``request()`` while a download of 3 chunks in ``cache`` neither grows nor ends, and the
    seconds it took."""
    hold = threading.Event()
    with _writing(cache, image, upto=3 * CHUNK, pause=0, hold=hold, fail=True):
        time.sleep(0.05)
        started = time.monotonic()
        got = request()
        waited = time.monotonic() - started
        hold.set()
    return got, waited


def test_a_stalled_download_ends_the_response_after_the_stall_timeout(
        server: PeerServer, source_cache: ImageCache, image: ImageMeta) -> None:
    (_, body), waited = _timed_while_stalled(source_cache, image,
                                             lambda: _raw_get(server, image.id))
    assert body == DATA[:3 * CHUNK] and 0.9 < waited < 5


def test_stopping_the_server_ends_a_request_waiting_for_a_stalled_download_at_once(
        source_cache: ImageCache, image: ImageMeta) -> None:
    """A request waiting for a download's next bytes touches no socket, so ending the
    connections does not wake it: the server's stop does (before, it waited out the stall
    timeout, 10 s here)."""
    grants = ServeGrants()
    grants.open(JOB, KEY, [image.id], time.time() + 600)
    server = PeerServer(source_cache.conf, source_cache, grants, send_timeout=10)
    server.start()
    got: list[tuple[bytes, bytes]] = []

    def request_then_stop() -> float:
        reader = threading.Thread(target=lambda: got.append(_raw_get(server, image.id)))
        reader.start()
        wait_for(lambda: server.active_connections == 1, "the request is served")
        time.sleep(0.2)  # the 3 chunks written are sent; it waits for more
        started = time.monotonic()
        server.stop()
        stopped_in = time.monotonic() - started
        reader.join(5)
        server.start()  # started again, it waits for the download as before
        again = threading.Thread(target=lambda: got.append(_raw_get(server, image.id)))
        again.start()
        wait_for(lambda: server.active_connections == 1, "the request is served again")
        time.sleep(0.5)
        assert server.active_connections == 1
        server.stop()
        again.join(5)
        return stopped_in

    try:
        stopped_in, _ = _timed_while_stalled(source_cache, image, request_then_stop)
    finally:
        server.stop()
    assert stopped_in < 2
    assert [body for _, body in got] == [DATA[:3 * CHUNK]] * 2


def test_a_request_beyond_the_written_part_is_told_to_ask_again_within_the_stall_timeout(
        server: PeerServer, source_cache: ImageCache, image: ImageMeta) -> None:
    beyond, waited = _timed_while_stalled(
        source_cache, image, lambda: _get(server, image.id, Range=f"bytes={3 * CHUNK}-"))
    assert (beyond.status_code, beyond.headers["Retry-After"]) == (503, "1")
    # Half the stall timeout (1 s): a receiver hears it before its own read timeout.
    assert 0.4 < waited < 0.9
    assert server.denied == {} and server.responses == {503: 1}


def test_a_request_is_answered_within_half_the_stall_timeout_whatever_it_waits_for(
        server: PeerServer, source_cache: ImageCache, image: ImageMeta) -> None:
    """An announced download that starts 0.3 s after the request, its file empty: the wait
    for it to start and the wait for its first byte share one deadline (0.5 s), within the
    receiver's read timeout (1 s)."""
    source_cache.in_flight.expect(image.id)
    path = pathlib.Path(source_cache.base_dir) / f"{partial_prefix(image.id)}test"
    release = threading.Event()

    def start_late() -> None:
        time.sleep(0.3)
        path.write_bytes(b"")
        with source_cache.in_flight.downloading(image.id, image.size, source_cache.base_dir,
                                                partial_prefix(image.id)):
            release.wait(5)

    starter = threading.Thread(target=start_late)
    starter.start()
    started = time.monotonic()
    resp = _get(server, image.id)
    waited = time.monotonic() - started
    release.set()
    starter.join(5)
    path.unlink()
    assert (resp.status_code, resp.headers["Retry-After"]) == (503, "1")
    assert 0.4 < waited < 0.8


def test_an_expected_image_is_served_once_its_download_starts(
        server: PeerServer, source_cache: ImageCache, image: ImageMeta) -> None:
    source_cache.in_flight.expect(image.id)
    got: list[requests.Response] = []
    reader = threading.Thread(target=lambda: got.append(_get(server, image.id)))
    reader.start()
    time.sleep(0.3)
    with _writing(source_cache, image):
        reader.join(10)
    assert got[0].status_code == 200 and got[0].content == DATA


def test_an_expected_image_whose_download_never_starts_is_not_found(
        server: PeerServer, source_cache: ImageCache, image: ImageMeta) -> None:
    source_cache.in_flight.expect(image.id)
    started = time.monotonic()
    early = _get(server, image.id)  # not yet: ask again
    assert (early.status_code, early.headers["Retry-After"]) == (503, "1")
    assert 0.4 < time.monotonic() - started < 0.9
    time.sleep(0.6)
    late = _get(server, image.id)  # peer_stall_timeout after the announcement: never
    assert (late.status_code, server.denied["not_cached"]) == (404, 1)
    assert late.headers[NOT_CACHED_HEADER] == image.id


def _hand_back(cache: ImageCache, image: ImageMeta) -> None:
    """A download of ``image`` whose peers all failed: the image goes back to the conductor,
    whose next call may first wait for a download slot."""
    with contextlib.suppress(PeersGone), cache.in_flight.downloading(
            image.id, image.size, cache.base_dir, partial_prefix(image.id),
            again=(PeersGone,)):
        raise PeersGone(image.id, "compute-c: refused")


def test_a_download_handed_back_is_waited_for_beyond_the_stall_timeout(
        server: PeerServer, source_cache: ImageCache, image: ImageMeta) -> None:
    _hand_back(source_cache, image)
    time.sleep(1.2)  # beyond peer_stall_timeout (1 s here)
    waiting = _get(server, image.id)
    assert (waiting.status_code, waiting.headers["Retry-After"]) == (503, "1")
    with _writing(source_cache, image):
        resumed = _get(server, image.id)
    assert (resumed.status_code, resumed.content) == (200, DATA)
    assert server.denied["not_cached"] == 0


def test_a_download_handed_back_and_not_resumed_is_not_found_after_the_wait_timeout(
        tmp_path: pathlib.Path, image: ImageMeta) -> None:
    conf = peer_conf(tmp_path, "compute-a", image_cache__peer_wait_timeout=3)
    cache = ImageCache(conf, SlowOrigin(conf))
    cache.ensure_dirs()
    grants = ServeGrants()
    grants.open(JOB, KEY, [image.id], time.time() + 600)
    with running_server(cache, grants) as server:
        _hand_back(cache, image)
        handed_back = time.monotonic()
        assert _get(server, image.id).status_code == 503  # not_yet
        time.sleep(max(0.0, handed_back + 3.2 - time.monotonic()))
        late = _get(server, image.id)
        assert (late.status_code, server.denied["not_cached"]) == (404, 1)


def test_without_cut_through_a_download_under_way_is_not_served(
        tmp_path: pathlib.Path, image: ImageMeta) -> None:
    conf = peer_conf(tmp_path, "compute-a", image_cache__peer_cut_through=False)
    cache = ImageCache(conf, SlowOrigin(conf))
    cache.ensure_dirs()
    grants = ServeGrants()
    grants.open(JOB, KEY, [image.id], time.time() + 600)
    server = PeerServer(conf, cache, grants)
    server.start()
    try:
        with _writing(cache, image):
            time.sleep(0.03)
            resp = _get(server, image.id)
    finally:
        server.stop()
    assert resp.status_code == 404


def test_a_receiver_takes_the_whole_image_from_a_source_still_downloading(
        tmp_path: pathlib.Path, server: PeerServer, source_cache: ImageCache,
        image: ImageMeta) -> None:
    """The real thing: compute-a's cache fetches from a slow origin while compute-b's
    fetches from compute-a; both publish the image, compute-b without an origin byte."""
    conf = peer_conf(tmp_path, "compute-b")
    receiver = ImageCache(conf, SlowOrigin(conf))
    source = threading.Thread(target=source_cache.fetch, args=(CTXT, image.id))
    source.start()
    time.sleep(0.05)
    assert source_cache.in_flight.get(image.id).state == "running"  # type: ignore[union-attr]
    outcome = receiver.fetch(CTXT, image.id, peers=[Peer(host="compute-a", url=server.url,
                                                         authorization=_auth(image.id))])
    source.join(10)
    assert server.responses == {200: 1}
    assert (outcome.download_path, outcome.source_host) == ("peer", "compute-a")
    assert (outcome.bytes_from_peers, outcome.bytes_from_origin) == (len(DATA), 0)
    for cache in (source_cache, receiver):
        assert pathlib.Path(cache.path_for(image.id)).read_bytes() == DATA
        assert not cache.partial_files()


def test_a_source_whose_origin_dies_hands_the_receiver_over_to_the_origin(
        tmp_path: pathlib.Path, server: PeerServer, source_cache: ImageCache,
        image: ImageMeta) -> None:
    """compute-a's download fails half way: compute-b's stream of it ends short, and
    compute-b resumes from the origin with Range; only the image's own bytes are published."""
    assert isinstance(source_cache.source, SlowOrigin)
    source_cache.source.fail_at = 8 * CHUNK
    source_cache.source.fail_when = threading.Event()
    conf = peer_conf(tmp_path, "compute-b")
    receiver = ImageCache(conf, SlowOrigin(conf))
    failed: list[BaseException] = []

    def fetch() -> None:
        try:
            source_cache.fetch(CTXT, image.id)
        except exception.ImageFetchError as exc:
            failed.append(exc)

    source = threading.Thread(target=fetch)
    source.start()
    time.sleep(0.05)
    threading.Timer(0.5, source_cache.source.fail_when.set).start()  # once compute-b streams
    outcome = receiver.fetch(CTXT, image.id, peers=[Peer(host="compute-a", url=server.url,
                                                         authorization=_auth(image.id))])
    source.join(10)
    assert failed and not os.path.exists(source_cache.path_for(image.id))
    assert outcome.download_path == "http" and 0 < outcome.bytes_from_peers < len(DATA)
    assert outcome.bytes_from_peers + outcome.bytes_from_origin == len(DATA)
    assert pathlib.Path(receiver.path_for(image.id)).read_bytes() == DATA


def test_a_receiver_waits_out_its_sources_stall_instead_of_the_origin(
        tmp_path: pathlib.Path, server: PeerServer, source_cache: ImageCache,
        image: ImageMeta) -> None:
    """compute-a's own download stalls for 2.5 s (its origin stopped sending) while compute-b
    streams it: compute-b's stream ends at the stall timeout (1 s), compute-b is told to ask
    again until compute-a's file grows, and takes every byte from compute-a: none from the
    origin (a chain behind a stalled host does not all go to the image service)."""
    assert isinstance(source_cache.source, SlowOrigin)
    source_cache.source.stall_at, source_cache.source.stall_for = 6 * CHUNK, 2.5
    conf = peer_conf(tmp_path, "compute-b")
    receiver = ImageCache(conf, SlowOrigin(conf))
    source = threading.Thread(target=source_cache.fetch, args=(CTXT, image.id))
    source.start()
    time.sleep(0.05)
    outcome = receiver.fetch(CTXT, image.id, peers=[Peer(host="compute-a", url=server.url,
                                                         authorization=_auth(image.id))])
    source.join(10)
    assert (outcome.download_path, outcome.source_host) == ("peer", "compute-a")
    assert (outcome.bytes_from_peers, outcome.bytes_from_origin) == (len(DATA), 0)
    assert outcome.peer_fallback is None
    assert server.responses.get(503, 0) >= 1 and server.responses.get(206, 0) >= 1
    assert pathlib.Path(receiver.path_for(image.id)).read_bytes() == DATA
