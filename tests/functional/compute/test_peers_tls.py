"""Mutual TLS between peers (``[image_cache] peer_ssl_*``) on real sockets: a real
:class:`PeerServer` on 127.0.0.1 with certificates made in the test (:mod:`tests.tls_certs`),
a real receiving :class:`ImageCache`, and raw TLS clients for the ones that must be refused."""

from __future__ import annotations

import contextlib
import os
import pathlib
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.common.peer_tokens import PeerClaims, mint, new_key
from fleetcache.compute.imagecache import ImageCache
from fleetcache.compute.peers import Peer, PeerServer, ServeGrants
from fleetcache.compute.peers.server import SPARE_WORKERS
from fleetcache.image.local import LocalImageSource
from fleetcache.image.source import ImageMeta
from tests.functional.compute.peerfixtures import (
    CHUNK,
    local_image,
    peer_conf,
    requests_held,
    running_server,
)
from tests.tls_certs import CertFiles, TestCA, self_signed
from tests.waiting import wait_for

CTXT = RequestContext()
DATA = os.urandom(8 * CHUNK + 7)
JOB = str(uuid.uuid4())
KEY = new_key()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    """The fleet's CA and its hosts' certificates, and the strangers'."""
    directory = tmp_path_factory.mktemp("pki")
    fleet, other = TestCA(directory / "fleet"), TestCA(directory / "other", "other CA")
    return {
        "compute-a": fleet.issue("compute-a"),
        "compute-b": fleet.issue("compute-b"),
        "elsewhere": fleet.issue("elsewhere", ip="192.0.2.7"),
        "other-ca": other.issue("compute-x"),
        "self-signed": self_signed(directory / "self", "compute-y"),
    }


def _conf(tmp_path: pathlib.Path, host: str, certs: CertFiles | None,
          **overrides: Any) -> cfg.ConfigOpts:
    if certs is not None:
        overrides.update(image_cache__peer_ssl_cert_file=certs.cert,
                         image_cache__peer_ssl_key_file=certs.key,
                         image_cache__peer_ssl_ca_file=certs.ca)
    return peer_conf(tmp_path, host, **overrides)


@pytest.fixture
def image(tmp_path: pathlib.Path) -> ImageMeta:
    return local_image(tmp_path, DATA)


@pytest.fixture
def grants(image: ImageMeta) -> ServeGrants:
    grants = ServeGrants()
    grants.open(JOB, KEY, [image.id], time.time() + 600)
    return grants


def _source_cache(tmp_path: pathlib.Path, image: ImageMeta,
                  certs: CertFiles | None) -> ImageCache:
    conf = _conf(tmp_path, "compute-a", certs)
    cache = ImageCache(conf, LocalImageSource(conf))
    assert cache.fetch(CTXT, image.id).downloaded
    return cache


@pytest.fixture
def server(tmp_path: pathlib.Path, image: ImageMeta, grants: ServeGrants,
           pki: dict[str, CertFiles]) -> Iterator[PeerServer]:
    """compute-a's image server, with TLS."""
    with running_server(_source_cache(tmp_path, image, pki["compute-a"]), grants) as running:
        yield running


def _receiver(tmp_path: pathlib.Path, certs: CertFiles | None) -> ImageCache:
    conf = _conf(tmp_path, "compute-b", certs)
    return ImageCache(conf, LocalImageSource(conf))


def _auth(image_id: str) -> str:
    return mint(KEY, PeerClaims(job=JOB, image_id=image_id, requester="compute-b",
                                requester_ip="127.0.0.1", server="compute-a",
                                expires=time.time() + 60))


def _peer(server: PeerServer, image_id: str) -> Peer:
    return Peer(host="compute-a", url=server.url, authorization=_auth(image_id))


def _port(server: PeerServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


def _request(image_id: str) -> bytes:
    return (f"GET /v1/images/{image_id} HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: {_auth(image_id)}\r\n\r\n").encode()


def _tls_get(server: PeerServer, image_id: str, certs: CertFiles | None,
             trust: str) -> bytes:
    """What a TLS client presenting ``certs`` (None: no certificate) and trusting ``trust``
    receives for a valid request of ``image_id``: b'' when the server refused it."""
    context = ssl.create_default_context(cafile=trust)
    if certs is not None:
        context.load_cert_chain(certs.cert, certs.key)
    answer = b""
    with socket.create_connection(("127.0.0.1", _port(server)), timeout=5) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
                sock.sendall(_request(image_id))
                while chunk := sock.recv(65536):
                    answer += chunk
        except (ssl.SSLError, ConnectionError):
            pass  # refused during the handshake (TLS 1.3: at the first read)
    return answer


# -- a fleet member gets the image ---------------------------------------------------------


def test_a_peer_with_a_certificate_of_the_fleet_ca_gets_the_image(
        tmp_path: pathlib.Path, server: PeerServer, image: ImageMeta,
        pki: dict[str, CertFiles]) -> None:
    assert server.url.startswith("https://127.0.0.1:")
    receiver = _receiver(tmp_path, pki["compute-b"])
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(server, image.id)])
    assert (outcome.download_path, outcome.source_host, outcome.peer_fallback) == (
        "peer", "compute-a", None)
    assert outcome.bytes_from_peers == len(DATA)
    assert pathlib.Path(receiver.path_for(image.id)).read_bytes() == DATA
    assert server.responses == {200: 1} and not server.denied
    ranged = _tls_get(server, image.id, pki["compute-b"], pki["compute-b"].ca)
    assert ranged.startswith(b"HTTP/1.1 200 ") and ranged.endswith(DATA)


def test_the_credential_is_still_required_over_tls(
        server: PeerServer, image: ImageMeta, pki: dict[str, CertFiles]) -> None:
    context = ssl.create_default_context(cafile=pki["compute-b"].ca)
    context.load_cert_chain(pki["compute-b"].cert, pki["compute-b"].key)
    with socket.create_connection(("127.0.0.1", _port(server)), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        sock.sendall(f"GET /v1/images/{image.id} HTTP/1.1\r\n\r\n".encode())
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 401 ")
    assert server.denied == {"malformed": 1}


# -- who is refused during the handshake ---------------------------------------------------


@pytest.mark.parametrize("client", [None, "self-signed", "other-ca"])
def test_a_client_without_a_fleet_certificate_gets_no_byte(
        server: PeerServer, image: ImageMeta, pki: dict[str, CertFiles],
        client: str | None) -> None:
    certs = pki[client] if client is not None else None
    assert _tls_get(server, image.id, certs, pki["compute-b"].ca) == b""
    wait_for(lambda: server.denied["tls"] == 1, "the refusal to be counted", 5)
    assert not server.responses  # no HTTP answer at all, let alone an image byte


def test_a_receiver_with_another_ca_falls_back_to_the_image_service(
        tmp_path: pathlib.Path, server: PeerServer, image: ImageMeta,
        pki: dict[str, CertFiles]) -> None:
    receiver = _receiver(tmp_path, pki["other-ca"])
    outcome = receiver.fetch(CTXT, image.id, peers=[_peer(server, image.id)])
    assert (outcome.download_path, outcome.bytes_from_peers) == ("http", 0)
    assert outcome.peer_fallback is not None and "compute-a" in outcome.peer_fallback
    assert not server.responses and server.denied["tls"] == 1
    assert pathlib.Path(receiver.path_for(image.id)).read_bytes() == DATA


def test_plain_http_to_a_tls_server_is_refused(server: PeerServer, image: ImageMeta) -> None:
    with socket.create_connection(("127.0.0.1", _port(server)), timeout=5) as sock:
        sock.sendall(_request(image.id))
        answer = b""
        with contextlib.suppress(ConnectionError):
            while chunk := sock.recv(65536):
                answer += chunk
    assert b"HTTP/1." not in answer and DATA[:64] not in answer
    assert server.denied["tls"] == 1 and not server.responses


def test_a_server_certificate_for_another_address_is_refused_by_the_client(
        tmp_path: pathlib.Path, image: ImageMeta, grants: ServeGrants,
        pki: dict[str, CertFiles]) -> None:
    # compute-a presents a fleet certificate, but for 192.0.2.7: a host that took over
    # another's address is not the host the conductor named.
    with running_server(_source_cache(tmp_path, image, pki["elsewhere"]), grants) as server:
        receiver = _receiver(tmp_path, pki["compute-b"])
        outcome = receiver.fetch(CTXT, image.id, peers=[_peer(server, image.id)])
        assert (outcome.download_path, outcome.bytes_from_peers) == ("http", 0)
        assert outcome.peer_fallback is not None and "127.0.0.1" in outcome.peer_fallback
        assert not server.responses


def test_a_tls_receiver_does_not_ask_a_plain_http_peer(
        tmp_path: pathlib.Path, image: ImageMeta, grants: ServeGrants,
        pki: dict[str, CertFiles]) -> None:
    with running_server(_source_cache(tmp_path, image, None), grants) as plain:
        assert plain.url.startswith("http://")
        receiver = _receiver(tmp_path, pki["compute-b"])
        outcome = receiver.fetch(CTXT, image.id, peers=[_peer(plain, image.id)])
        assert outcome.download_path == "http"
        assert outcome.peer_fallback is not None and "plain HTTP" in outcome.peer_fallback
        assert not plain.responses  # its credential never left in clear


# -- slow clients ---------------------------------------------------------------------------


def test_a_silent_client_is_cut_at_the_header_deadline(
        tmp_path: pathlib.Path, image: ImageMeta, grants: ServeGrants,
        pki: dict[str, CertFiles]) -> None:
    cache = _source_cache(tmp_path, image, pki["compute-a"])
    with running_server(cache, grants, header_timeout=1.0) as server:
        opened = time.monotonic()
        silent = [socket.create_connection(("127.0.0.1", _port(server)), timeout=5)
                  for _ in range(3 * (server.max_uploads + SPARE_WORKERS))]
        try:
            wait_for(lambda: server.waiting_connections == len(silent), "the handshakes", 5)
            # Meanwhile a fleet member is served at once: the handshakes under way hold
            # neither a worker nor the upload slot (peer_max_uploads = 1).
            assert server.active_connections == 0
            answer = _tls_get(server, image.id, pki["compute-b"], pki["compute-b"].ca)
            assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(DATA)
            assert time.monotonic() - opened < 0.9
            for sock in silent:
                assert sock.recv(1024) == b""  # closed by the server, nothing sent
            assert time.monotonic() - opened < 2
            wait_for(lambda: server.waiting_connections == 0, "the door to be empty", 2)
        finally:
            for sock in silent:
                sock.close()
        assert not server.denied  # a client that said nothing was refused nothing


def test_requests_beyond_every_worker_get_503_at_once(
        tmp_path: pathlib.Path, image: ImageMeta, grants: ServeGrants,
        pki: dict[str, CertFiles]) -> None:
    cache = _source_cache(tmp_path, image, pki["compute-a"])
    context = ssl.create_default_context(cafile=pki["compute-b"].ca)
    context.load_cert_chain(pki["compute-b"].cert, pki["compute-b"].key)
    with running_server(cache, grants, header_timeout=5) as server, requests_held(server), \
            contextlib.ExitStack() as busy:
        for _ in range(1 + SPARE_WORKERS):
            raw = socket.create_connection(("127.0.0.1", _port(server)), timeout=5)
            sock = busy.enter_context(context.wrap_socket(raw, server_hostname="127.0.0.1"))
            sock.sendall(_request(image.id))
        wait_for(lambda: server.active_connections == 1 + SPARE_WORKERS, "every worker busy", 5)
        started = time.monotonic()
        answer = _tls_get(server, image.id, pki["compute-b"], pki["compute-b"].ca)
        assert answer.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: 1\r\n" in answer
        assert time.monotonic() - started < 1
        assert server.responses == {503: 1} and not server.denied


def test_a_client_trickling_its_handshake_is_cut_at_the_header_deadline(
        tmp_path: pathlib.Path, image: ImageMeta, grants: ServeGrants,
        pki: dict[str, CertFiles]) -> None:
    context = ssl.create_default_context(cafile=pki["compute-b"].ca)
    hello = ssl.MemoryBIO()
    client = context.wrap_bio(ssl.MemoryBIO(), hello, server_hostname="127.0.0.1")
    with contextlib.suppress(ssl.SSLWantReadError):
        client.do_handshake()
    client_hello = hello.read()  # a real ClientHello, sent one byte each 0.05 s
    cache = _source_cache(tmp_path, image, pki["compute-a"])
    with running_server(cache, grants, header_timeout=0.5) as server, \
            socket.create_connection(("127.0.0.1", _port(server)), timeout=5) as sock:
        started, cut = time.monotonic(), False
        for byte in client_hello:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                cut = True
            cut = cut or _closed(sock)
            if cut or time.monotonic() - started > 3:
                break
            time.sleep(0.05)
        assert cut and time.monotonic() - started < 1.5
        assert len(client_hello) * 0.05 > 3  # it would have taken longer than that
        assert not server.denied


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


# -- configuration -------------------------------------------------------------------------


def test_a_half_configured_server_does_not_start(
        tmp_path: pathlib.Path, grants: ServeGrants, pki: dict[str, CertFiles]) -> None:
    conf = _conf(tmp_path, "compute-a", None,
                 image_cache__peer_ssl_cert_file=pki["compute-a"].cert)
    cache = ImageCache(conf, LocalImageSource(conf))
    with pytest.raises(exception.InvalidConfiguration,
                       match="peer_ssl_cert_file set without peer_ssl_key_file, "
                       "peer_ssl_ca_file"):
        PeerServer(conf, cache, grants)


def test_stopping_the_server_ends_a_tls_upload_under_way(
        tmp_path: pathlib.Path, image: ImageMeta, grants: ServeGrants,
        pki: dict[str, CertFiles]) -> None:
    conf = _conf(tmp_path, "compute-a", pki["compute-a"],
                 image_cache__max_upload_bytes_per_second=2 * CHUNK)
    cache = ImageCache(conf, LocalImageSource(conf))
    cache.fetch(CTXT, image.id)
    server = PeerServer(conf, cache, grants)
    server.start()
    context = ssl.create_default_context(cafile=pki["compute-b"].ca)
    context.load_cert_chain(pki["compute-b"].cert, pki["compute-b"].key)
    with socket.create_connection(("127.0.0.1", _port(server)), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        sock.sendall(_request(image.id))
        got = sock.recv(65536)
        assert got.startswith(b"HTTP/1.1 200 ")  # the upload is under way, throttled
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 2
        with contextlib.suppress(OSError):  # cut short
            while chunk := sock.recv(65536):
                got += chunk
        assert len(got) < len(DATA)
