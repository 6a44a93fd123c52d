"""What the peer client accepts of a response before it writes a byte, and how it waits for
peers that ask to be asked again."""

from __future__ import annotations

import contextlib
import http.client
import io
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from fleetcache.common.context import RequestContext
from fleetcache.compute.peers import source
from fleetcache.compute.peers.http_wire import NOT_CACHED_HEADER
from fleetcache.compute.rpcapi import Peer
from fleetcache.image import ImageMeta, http_into
from tests.unit.common.clock import SleepingClock
from tests.unit.image.fixtures import make_conf

META = ImageMeta(id="a26887c6-c47b-4654-abb5-dfadf7d3f803", size=10,
                 os_hash_algo="sha512", os_hash_value="0" * 128)


class _Socket:
    """What ``http.client.HTTPResponse`` reads a response from: these bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def makefile(self, mode: str) -> io.BytesIO:
        return io.BytesIO(self.data)


def _response(status: int, body: bytes = b"", **headers: str) -> http_into.Body:
    """A response of ``status`` with ``headers`` and ``body``, parsed by ``http.client``."""
    head = f"HTTP/1.1 {status} X\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    resp = http.client.HTTPResponse(_Socket(head.encode() + body))  # type: ignore[arg-type]
    resp.begin()
    return http_into.Body(resp)


def test_a_plain_whole_body_ends_at_the_image_size() -> None:
    assert source._check_response(_response(200, **{"Content-Length": "10"}), META, 0) == 10


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br"])
def test_an_encoded_body_is_left(encoding: str) -> None:
    resp = _response(200, **{"Content-Length": "10", "Content-Encoding": encoding})
    with pytest.raises(source._Left, match="encoded"):
        source._check_response(resp, META, 0)


class _Busy:
    """An opener whose every peer answers 503 with ``retry_after``; counts the requests."""

    def __init__(self, retry_after: str) -> None:
        self.retry_after = retry_after
        self.requests = 0

    def __call__(self, url: str, headers: Mapping[str, str],
                 ) -> contextlib.AbstractContextManager[http_into.Body]:
        self.requests += 1
        return contextlib.nullcontext(_response(503, **{"Retry-After": self.retry_after}))


PEER = Peer(host="busy", url="http://10.0.0.2:8790", authorization="FleetcachePeer x.y")


def _busy_source(session: source.Opener, clock: SleepingClock, **kwargs: Any) -> source.PeerSource:
    conf = make_conf(image_cache__peer_wait_timeout=2)
    return source.PeerSource(conf, [PEER], opener=session,
                             clock=lambda: clock.now, sleep=clock.sleep, **kwargs)


def test_a_peer_answering_retry_after_0_is_asked_again_at_most_five_times_a_second() -> None:
    session, clock = _Busy("0"), SleepingClock()
    with pytest.raises(source.PeersFailed, match="HTTP 503"):
        _busy_source(session, clock).download(RequestContext(), META, io.BytesIO())
    # Each pause at least MIN_PAUSE, but the last, cut at peer_wait_timeout (2 s).
    assert clock.slept and min(clock.slept[:-1]) >= source.MIN_PAUSE
    assert sum(clock.slept) == pytest.approx(2)
    assert session.requests <= 2 / source.MIN_PAUSE + 2


def test_a_wait_for_busy_peers_stops_at_the_calls_end_time() -> None:
    class Ended(Exception):
        pass

    def at_end() -> None:
        raise Ended

    session = _Busy("5")
    peers = source.PeerSource(make_conf(image_cache__peer_wait_timeout=60), [PEER],
                              opener=session,
                              until=time.time() + 0.3, at_end=at_end)
    started = time.monotonic()
    with pytest.raises(Ended):
        peers.download(RequestContext(), META, io.BytesIO())
    assert session.requests == 1
    assert 0.25 < time.monotonic() - started < 2  # the end time, not the 5 s it asked


def test_peers_that_only_asked_to_wait_are_not_named_failed_when_handed_back() -> None:
    """A hand-back to the conductor (RPC 1.7) names the peers that failed in transport: one
    that kept answering 503 until the wait ended is alive, and the conductor must not set
    it aside for the job (nor free the image service slot it may hold)."""
    named: list[tuple[str, ...]] = []

    class Back(Exception):
        pass

    def at_peers_gone(peers: source.PeerSource) -> None:
        named.append(peers.failed_hosts)
        raise Back(peers.failure())

    with pytest.raises(Back):
        _busy_source(_Busy("1"), SleepingClock(), at_peers_gone=at_peers_gone).download(
            RequestContext(), META, io.BytesIO())
    assert named == [()]


#: The image server's answer for an image it does not hold: a 404 that names it.
NOT_CACHED = "not cached"


def _answer(status: int | str, **headers: str) -> http_into.Body:
    """A response of ``status``, or :data:`NOT_CACHED`'s 404."""
    if status == NOT_CACHED:
        return _response(404, **{NOT_CACHED_HEADER: META.id})
    assert isinstance(status, int)
    return _response(status, **headers)


class _ByHost:
    """An opener whose peer at ``10.0.0.<n>`` answers ``statuses[n]`` (a status or
    :data:`NOT_CACHED`); None: refuses the connection."""

    def __init__(self, statuses: Mapping[str, int | str | None]) -> None:
        self.statuses = statuses

    def __call__(self, url: str, headers: Mapping[str, str],
                 ) -> contextlib.AbstractContextManager[http_into.Body]:
        status = self.statuses[url.split("/")[2].split(":")[0]]
        if status is None:
            raise ConnectionRefusedError("refused")
        return contextlib.nullcontext(_answer(status))


class _Answers:
    """An opener whose one peer gives each answer of ``answers`` in turn: a status (or
    :data:`NOT_CACHED`), or ``(200, body)`` whose body stops short of the image."""

    def __init__(self, *answers: int | str | tuple[int, bytes]) -> None:
        self.answers = list(answers)

    def __call__(self, url: str, headers: Mapping[str, str],
                 ) -> contextlib.AbstractContextManager[http_into.Body]:
        answer = self.answers.pop(0)
        if isinstance(answer, tuple):
            status, body = answer
            return contextlib.nullcontext(_response(status, body, **{"Content-Length": "10"}))
        return contextlib.nullcontext(_answer(answer, **{"Retry-After": "0"}))


@pytest.mark.parametrize(("answers", "failed", "absent"), [
    ((503, NOT_CACHED), (), ("busy",)),  # busy, then its download ended: it lacks the image
    (((200, b"12345"), NOT_CACHED), ("busy",), ()),  # it cut a transfer short: failed
])
def test_a_404_is_absent_unless_the_peer_cut_a_transfer_short(
        answers: tuple[int | str | tuple[int, bytes], ...], failed: tuple[str, ...],
        absent: tuple[str, ...]) -> None:
    named: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    with pytest.raises(source.PeersFailed, match="HTTP 404"):
        _busy_source(_Answers(*answers), SleepingClock(),
                     at_peers_gone=_naming_into(named)).download(
            RequestContext(), META, io.BytesIO())
    assert named == [(failed, absent)]


def _naming_into(named: list[tuple[tuple[str, ...], tuple[str, ...]]],
                 ) -> Callable[[source.PeerSource], None]:
    """An ``at_peers_gone`` that keeps the failed and absent peers in ``named``, then
    raises the hand-back as :class:`~source.PeersFailed`."""
    def at_peers_gone(peers: source.PeerSource) -> None:
        named.append((peers.failed_hosts, peers.absent_hosts))
        raise source.PeersFailed(image_id=META.id, reason=peers.failure())
    return at_peers_gone


def test_a_peer_that_answers_404_is_absent_not_failed() -> None:
    """A 404 says the peer does not hold the image (a converted or aged-out base): the
    conductor must stop naming it for this image, not set it aside for the whole job as it
    does a peer that cannot be reached."""
    peers = [Peer(host="converted", url="http://10.0.0.2:8790", authorization="x"),
             Peer(host="dead", url="http://10.0.0.3:8790", authorization="x"),
             Peer(host="crashed", url="http://10.0.0.4:8790", authorization="x")]
    gone: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    opener = _ByHost({"10.0.0.2": NOT_CACHED, "10.0.0.3": None, "10.0.0.4": 500})
    with pytest.raises(source.PeersFailed, match="crashed: HTTP 500"):
        source.PeerSource(make_conf(), peers, opener=opener,
                          at_peers_gone=_naming_into(gone)).download(
            RequestContext(), META, io.BytesIO())
    assert gone == [(("dead", "crashed"), ("converted",))]


OTHER_IMAGE = "9b5e1a8e-0000-4000-8000-000000000000"


@pytest.mark.parametrize(("headers", "marks", "failed", "absent"), [
    # a wrong route, or another HTTP service at the URL of a peer that marks its 404s
    ({}, True, ("busy",), ()),
    ({}, False, (), ("busy",)),  # a peer from before the header: any 404 is absence
    ({NOT_CACHED_HEADER: OTHER_IMAGE}, True, ("busy",), ()),  # another image's answer
    ({NOT_CACHED_HEADER: OTHER_IMAGE}, False, ("busy",), ()),
    ({NOT_CACHED_HEADER: f" {META.id.upper()} "}, True, (), ("busy",)),
])
def test_a_404_is_absent_only_when_it_names_the_image_or_the_peer_marks_none(
        headers: dict[str, str], marks: bool, failed: tuple[str, ...],
        absent: tuple[str, ...]) -> None:
    """Only the image server's own answer that it lacks this image sets a peer aside for
    the image alone; any other 404 is a peer the job should stop using, as a dead one,
    unless the peer is not known to mark those answers (an older compute)."""
    gone: list[tuple[tuple[str, ...], tuple[str, ...]]] = []

    def opener(url: str, _: Mapping[str, str]) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext(_response(404, **headers))

    peer = Peer(**PEER)
    if marks:
        peer["not_cached_header"] = True
    peers = source.PeerSource(make_conf(), [peer], opener=opener,
                              at_peers_gone=_naming_into(gone))
    with pytest.raises(source.PeersFailed, match="busy: HTTP 404"):
        peers.download(RequestContext(), META, io.BytesIO())
    assert gone == [(failed, absent)]
    assert peers.fallback_kind == ("peer_absent" if absent else "peer_failed")


@pytest.mark.parametrize(("statuses", "kind"), [
    ({"10.0.0.2": NOT_CACHED, "10.0.0.3": NOT_CACHED}, "peer_absent"),
    ({"10.0.0.2": NOT_CACHED, "10.0.0.3": None}, "peer_failed"),
    ({"10.0.0.2": NOT_CACHED, "10.0.0.3": 503}, "peer_failed"),  # busy until the wait ended
])
def test_the_fallback_says_absent_only_when_every_peer_lacked_the_image(
        statuses: dict[str, int | str | None], kind: str) -> None:
    clock = SleepingClock()
    peers = source.PeerSource(
        make_conf(image_cache__peer_wait_timeout=2),
        [Peer(host="a", url="http://10.0.0.2:8790", authorization="x"),
         Peer(host="b", url="http://10.0.0.3:8790", authorization="x")],
        opener=_ByHost(statuses), clock=lambda: clock.now, sleep=clock.sleep)
    with pytest.raises(source.PeersFailed):
        peers.download(RequestContext(), META, io.BytesIO())
    assert peers.fallback_kind == kind


class _Whole:
    """An opener whose peer answers 200 with ``body``."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def __call__(self, url: str, headers: Mapping[str, str],
                 ) -> contextlib.AbstractContextManager[http_into.Body]:
        return contextlib.nullcontext(
            _response(200, self.body, **{"Content-Length": str(len(self.body))}))


class _Chunks:
    """A writer that keeps the size of each chunk it is handed."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def write(self, data: Any, /) -> int:
        self.sizes.append(len(data))
        return len(data)


def _largest_read(paced_at: int | None) -> int:
    body = bytes(4 * 1024 * 1024)
    meta = ImageMeta(id=META.id, size=len(body), os_hash_algo="sha512",
                     os_hash_value="0" * 128)
    peers = source.PeerSource(make_conf(), [PEER], opener=_Whole(body))
    if paced_at is not None:
        assert peers.paced(paced_at) is peers
    writer = _Chunks()
    peers.download(RequestContext(), meta, writer)
    assert sum(writer.sizes) == len(body)
    return max(writer.sizes)


def test_a_peer_is_read_in_chunks_of_up_to_the_download_chunk_size() -> None:
    """Bytes that arrive at once grow the reads past 1 MiB (the former peer cap), as from
    Glance: 64 KiB doubling to 2 MiB within the 4 MiB body."""
    assert _largest_read(None) == 2 * 1024 * 1024


def test_a_paced_peer_download_reads_as_little_as_glances_at_that_rate() -> None:
    """At 1 MiB/s the receive buffer Glance's reads are sized by is its 64 KiB least, so a
    read is at most 32 KiB however fast the bytes are there."""
    assert _largest_read(1024 * 1024) == 32 * 1024
