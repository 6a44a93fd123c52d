"""Unit tests of the Glance HTTP image source against a local fake Glance over real HTTP."""

from __future__ import annotations

import hashlib
import io
import os
import pathlib
import socket
from collections.abc import Iterator

import pytest
import urllib3

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.image import glance as glance_module
from fleetcache.image import verify
from fleetcache.image.glance import GlanceImageSource, paced_buffer
from fleetcache.image.source import ImageMeta
from tests.tls_certs import TestCA
from tests.unit.image.fakeglance import FakeGlance
from tests.unit.image.fixtures import buffers_cannot_be_mapped, make_conf

CTXT = RequestContext(request_id="req-test")
DATA = os.urandom(3 * 1024 * 1024 + 17)


@pytest.fixture
def glance() -> Iterator[FakeGlance]:
    with FakeGlance() as server:
        yield server


def _source(*urls: str, retries: int = 3, chunk: int = 64 * 1024) -> GlanceImageSource:
    conf = make_conf(glance__api_servers=list(urls), glance__num_retries=retries,
                     glance__download_chunk_size=chunk, glance__request_timeout=5.0)
    source = GlanceImageSource(conf)
    source.retry_delay = 0.01
    return source


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _download(source: GlanceImageSource, meta: ImageMeta) -> bytes:
    out = io.BytesIO()
    assert source.download(CTXT, meta, out) == len(out.getvalue())
    return out.getvalue()


def test_show_returns_glance_fields_and_properties(glance: FakeGlance) -> None:
    body = glance.add(DATA, os_distro="ubuntu", trove="true")
    meta = _source(glance.url).show(CTXT, body["id"])
    assert (meta.id, meta.status, meta.size, meta.os_hash_value) == (
        body["id"], "active", len(DATA), hashlib.sha512(DATA).hexdigest())
    assert meta.properties == {"os_distro": "ubuntu", "trove": "true"}


def test_show_sends_request_id_and_caller_token(glance: FakeGlance) -> None:
    body = glance.add(b"x")
    ctxt = RequestContext(auth_token="tok-123", request_id="req-abc")
    _source(glance.url).show(ctxt, body["id"])
    headers = glance.requests[-1][1]
    assert headers["x-auth-token"] == "tok-123"
    assert headers["x-openstack-request-id"] == "req-abc"


def test_show_missing_image_is_not_found(glance: FakeGlance) -> None:
    with pytest.raises(exception.ImageNotFound):
        _source(glance.url).show(CTXT, "no-such-image")


def test_show_forbidden_is_not_available(glance: FakeGlance) -> None:
    glance.statuses = [403]
    with pytest.raises(exception.ImageNotAvailable, match="forbidden"):
        _source(glance.url).show(CTXT, "img")


def test_show_queued_image_is_not_available(glance: FakeGlance) -> None:
    body = glance.add(b"", status="queued")
    with pytest.raises(exception.ImageNotAvailable, match="'queued'"):
        _source(glance.url).show(CTXT, body["id"])


def test_server_error_is_fetch_error_without_retry(glance: FakeGlance) -> None:
    glance.statuses = [500]
    with pytest.raises(exception.ImageFetchError, match="HTTP 500"):
        _source(glance.url).show(CTXT, "img")
    assert len(glance.requests) == 1


def test_503_is_retried(glance: FakeGlance) -> None:
    body = glance.add(b"abc")
    glance.statuses = [503, 503]
    assert _source(glance.url).show(CTXT, body["id"]).id == body["id"]
    assert len(glance.requests) == 3


def test_retries_exhausted_is_fetch_error(glance: FakeGlance) -> None:
    glance.statuses = [503] * 5
    with pytest.raises(exception.ImageFetchError, match="gave up after 3 attempts"):
        _source(glance.url, retries=2).show(CTXT, "img")


def test_endpoints_are_tried_in_turn(glance: FakeGlance) -> None:
    body = glance.add(DATA)
    source = _source(_dead_url(), glance.url + "/v2/")
    meta = source.show(CTXT, body["id"])
    assert _download(source, meta) == DATA


def test_unreachable_service_is_fetch_error() -> None:
    with pytest.raises(exception.ImageFetchError, match="gave up after 2 attempts"):
        _source(_dead_url(), retries=1).show(CTXT, "img")


def test_download_streams_in_configured_chunks(glance: FakeGlance) -> None:
    body = glance.add(DATA)
    source = _source(glance.url, chunk=1024 * 1024)
    sizes: list[int] = []

    class Recorder(io.BytesIO):
        def write(self, data: bytes, /) -> int:  # type: ignore[override]
            sizes.append(len(data))
            return super().write(data)

    out = Recorder()
    seen: list[int] = []
    source.download(CTXT, ImageMeta.from_dict(body), out, seen.append)
    assert out.getvalue() == DATA
    assert max(sizes) == 1024 * 1024 and seen[-1] == len(DATA)


@pytest.mark.parametrize(("rate", "buffer"), [
    (1024, 64 * 1024), (8 * 1024 * 1024, 128 * 1024), (12 * 1024 * 1024, 128 * 1024),
    (10**9, 4 * 1024 * 1024)])
def test_a_paced_downloads_buffer_is_a_sixty_fourth_of_a_second_within_bounds(
        rate: int, buffer: int) -> None:
    assert paced_buffer(rate) == buffer


def test_a_paced_variant_reads_small_chunks_over_small_receive_buffers(
        glance: FakeGlance) -> None:
    body = glance.add(DATA)
    source = _source(glance.url, chunk=4 * 1024 * 1024)
    rate = 8 * 1024 * 1024
    paced = source.paced(rate)
    assert paced is source.paced(rate) and paced.paced(rate) is paced  # one per buffer
    assert source.paced(rate // 4) is not paced
    adapter = paced.session.session.get_adapter(glance.url)
    options = adapter.poolmanager.connection_pool_kw["socket_options"]
    assert (socket.SOL_SOCKET, socket.SO_RCVBUF, paced_buffer(rate)) in options
    assert (socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1448) in options
    assert source.session.session.get_adapter(glance.url) is not adapter
    sizes: list[int] = []

    class Recorder(io.BytesIO):
        def write(self, data: bytes, /) -> int:  # type: ignore[override]
            sizes.append(len(data))
            return super().write(data)

    out = Recorder()
    paced.download(CTXT, ImageMeta.from_dict(body), out)
    assert out.getvalue() == DATA
    assert max(sizes) == paced_buffer(rate) // 2 == paced.chunk_size
    assert source.chunk_size == 4 * 1024 * 1024  # the unpaced source is left as it was


def test_download_resumes_with_range_after_a_cut(glance: FakeGlance) -> None:
    body = glance.add(DATA)
    glance.cuts = [1_000_000, 500_000]
    assert _download(_source(glance.url, chunk=65536), ImageMeta.from_dict(body)) == DATA
    ranges = [h.get("range") for h in glance.file_gets(body["id"])]
    # Every byte received before each cut is kept, the chunk it cut short included.
    assert ranges == [None, "bytes=1000000-", "bytes=1500000-"]


def test_download_from_an_offset_asks_range_and_writes_the_rest(glance: FakeGlance) -> None:
    body = glance.add(DATA)
    glance.cuts = [500_000]
    out, seen = io.BytesIO(), []
    offset = 1_000_003
    got = _source(glance.url, chunk=65536).download_from(
        CTXT, ImageMeta.from_dict(body), out, offset, seen.append)
    assert (got, out.getvalue()) == (len(DATA) - offset, DATA[offset:])
    assert seen[-1] == len(DATA)  # progress counts the image's bytes, the offset included
    ranges = [h.get("range") for h in glance.file_gets(body["id"])]
    assert ranges[0] == f"bytes={offset}-" and len(ranges) == 2


def test_download_resumes_when_server_ignores_range(glance: FakeGlance) -> None:
    body = glance.add(DATA)
    glance.cuts = [777_777]
    glance.ignore_range = True
    assert _download(_source(glance.url), ImageMeta.from_dict(body)) == DATA


def test_download_gives_up_after_num_retries_cuts_without_progress(glance: FakeGlance) -> None:
    body = glance.add(DATA)
    glance.cuts = [200_000, 0, 0, 0]  # progress, then two retries (num_retries) bring nothing
    with pytest.raises(exception.ImageFetchError, match="3 attempts, 200000 bytes received"):
        _download(_source(glance.url, retries=2), ImageMeta.from_dict(body))
    assert len(glance.file_gets(body["id"])) == 3


def test_cuts_that_make_progress_do_not_use_up_the_retries(glance: FakeGlance) -> None:
    body = glance.add(DATA)
    glance.cuts = [300_000] * 10  # ten cuts, each after new bytes; num_retries is 1
    assert _download(_source(glance.url, retries=1), ImageMeta.from_dict(body)) == DATA
    assert len(glance.file_gets(body["id"])) == 11


def test_no_retries_means_none_even_after_progress(glance: FakeGlance) -> None:
    body = glance.add(DATA)
    glance.cuts = [300_000]
    with pytest.raises(exception.ImageFetchError, match="gave up after 1 attempts"):
        _download(_source(glance.url, retries=0), ImageMeta.from_dict(body))


def test_progress_restarts_the_pause(glance: FakeGlance, monkeypatch: pytest.MonkeyPatch) -> None:
    body = glance.add(DATA)
    glance.cuts = [0, 0, 300_000, 0]
    pauses: list[float] = []
    monkeypatch.setattr("fleetcache.image.glance.time.sleep", pauses.append)
    assert _download(_source(glance.url, retries=3), ImageMeta.from_dict(body)) == DATA
    assert [p for p in pauses if p] == [0.01, 0.02, 0.01, 0.02]  # (0: the fake's own sleep)


def test_download_sends_the_callers_token_and_request_id(glance: FakeGlance) -> None:
    body = glance.add(DATA)
    ctxt = RequestContext(request_id="req-test", auth_token="tok-123",
                          global_request_id="req-11111111-2222-3333-4444-555555555555")
    _source(glance.url).download(ctxt, ImageMeta.from_dict(body), io.BytesIO())
    headers = glance.file_gets(body["id"])[0]
    assert headers["x-auth-token"] == "tok-123"
    assert headers["x-openstack-request-id"] == ctxt.global_request_id
    assert headers["accept-encoding"] == "identity"


def test_download_over_tls_verifies_the_image_service_with_the_configured_ca(
        tmp_path: pathlib.Path) -> None:
    ca = TestCA(tmp_path)
    certs = ca.issue("glance")
    with FakeGlance(tls=(certs.cert, certs.key)) as glance:
        body = glance.add(DATA)
        trusting = _source(glance.url)
        trusting.conf.set_override("cafile", ca.ca_file, group="glance")
        assert _download(GlanceImageSource(trusting.conf), ImageMeta.from_dict(body)) == DATA
        with pytest.raises(exception.ImageFetchError, match="CERTIFICATE_VERIFY_FAILED"):
            _download(_source(glance.url, retries=0), ImageMeta.from_dict(body))


def test_a_missing_ca_file_is_a_configuration_error_naming_the_option(
        tmp_path: pathlib.Path) -> None:
    conf = make_conf(glance__api_servers=["https://glance.example:9292"],
                     glance__cafile=str(tmp_path / "missing.pem"))
    with pytest.raises(exception.InvalidConfiguration, match=r"\[glance\] cafile"):
        GlanceImageSource(conf)


def test_a_proxy_of_the_environment_is_used_as_the_session_would(
        glance: FakeGlance, monkeypatch: pytest.MonkeyPatch) -> None:
    body = glance.add(DATA)
    monkeypatch.setenv("http_proxy", _dead_url())
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    with pytest.raises(exception.ImageFetchError, match="proxy"):
        _download(_source(glance.url, retries=0), ImageMeta.from_dict(body))
    assert glance.file_gets(body["id"]) == []  # it went to the proxy, not around it
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    assert _download(_source(glance.url), ImageMeta.from_dict(body)) == DATA


def test_a_redirected_download_follows_the_redirect_as_the_session_does(
        glance: FakeGlance) -> None:
    body = glance.add(DATA)
    glance.redirects = [f"/v2/images/{body['id']}/file"]
    assert _download(_source(glance.url), ImageMeta.from_dict(body)) == DATA
    assert len(glance.file_gets(body["id"])) == 2


def test_a_401_with_service_auth_invalidates_the_token_and_retries(glance: FakeGlance) -> None:
    body = glance.add(DATA)
    source = _source(glance.url)
    source._service_auth = True
    invalidated: list[object] = []
    source.session.get_auth_headers = lambda *a, **k: {"X-Auth-Token": "svc"}  # type: ignore[method-assign]
    source.session.invalidate = lambda *a, **k: invalidated.append(a) or True  # type: ignore[method-assign]
    glance.statuses = [401]
    assert _download(source, ImageMeta.from_dict(body)) == DATA
    assert len(invalidated) == 1
    assert [h["x-auth-token"] for h in glance.file_gets(body["id"])] == ["svc", "svc"]


def test_download_missing_image_is_not_found(glance: FakeGlance) -> None:
    with pytest.raises(exception.ImageNotFound):
        _download(_source(glance.url), ImageMeta(id="gone"))


def test_writer_errors_are_not_retried(glance: FakeGlance) -> None:
    body = glance.add(DATA)

    class Full(io.BytesIO):
        def write(self, data: bytes, /) -> int:  # type: ignore[override]
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        _source(glance.url).download(CTXT, ImageMeta.from_dict(body), Full())
    assert len(glance.file_gets(body["id"])) == 1


def test_a_download_buffer_that_cannot_be_mapped_is_not_retried(
        glance: FakeGlance, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host out of memory is not a network failure: no retry, no error blaming the GET."""
    body = glance.add(DATA)
    meta = ImageMeta.from_dict(body)
    writer = verify.VerifyingWriter(io.BytesIO(), verify.ImageVerifier(meta))
    buffers_cannot_be_mapped(monkeypatch)
    with pytest.raises(MemoryError, match="cannot map a .*-byte download buffer"):
        _source(glance.url).download(CTXT, meta, writer)
    writer.abort()
    assert len(glance.file_gets(body["id"])) == 1


def test_no_endpoint_and_no_auth_is_invalid_configuration() -> None:
    with pytest.raises(exception.InvalidConfiguration, match="api_servers is empty"):
        GlanceImageSource(make_conf())


@pytest.mark.parametrize("error", [
    urllib3.exceptions.SSLError("[SSL: DECRYPTION_FAILED_OR_BAD_RECORD_MAC]"),
    urllib3.exceptions.ProtocolError("Connection broken: IncompleteRead"),
    urllib3.exceptions.ReadTimeoutError(None, "/v2/images/img/file", "read timed out"),
])
def test_a_transport_error_read_from_the_body_is_retried(error: Exception) -> None:
    """The body is read from urllib3 directly (prompt_chunks): its errors, which requests no
    longer translates there, are transient as requests' own were."""
    with pytest.raises(glance_module._Transient):
        with glance_module._translated("img", "https://glance/v2/images/img/file"):
            raise error
