"""Download the stack's sample images from the real Glance into a fresh image cache.

Checks byte identity and hashes against what Glance itself reports (``os_hash_value``,
``checksum``, ``size``), a hit that touches and does not download again, resuming a download
with a real ``Range`` request, and that two processes asking for one image at once fetch it
from Glance once.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import ImageCache, cache_name
from fleetcache.image import http_into
from fleetcache.image.glance import GlanceImageSource
from fleetcache.image.source import ImageMeta
from tests.integration.stackops import file_gets, glance_image
from tests.unit.image.fixtures import make_conf
from tests.waiting import wait_for

pytestmark = pytest.mark.integration
CTXT = RequestContext(request_id="req-integration")


def _image_ids(stack: Any) -> list[str]:
    ids = [i if isinstance(i, str) else i["id"] for i in stack.sample_images]
    assert len(ids) >= 2, "the stack should hold a qcow2 and a raw sample image"
    return ids


def _cache(stack: Any, instances: pathlib.Path, force_raw_images: bool = False) -> ImageCache:
    """A cache that keeps images as Glance serves them (unless ``force_raw_images``)."""
    conf = make_conf(instances_path=str(instances), glance__api_servers=[stack.glance_url],
                     **stack.glance_auth_options(),
                     force_raw_images=force_raw_images)
    return ImageCache(conf, GlanceImageSource(conf))


def test_sample_images_download_byte_identical(stack: Any, tmp_path: pathlib.Path) -> None:
    cache = _cache(stack, tmp_path / "instances")
    formats = set()
    for image_id in _image_ids(stack):
        body = glance_image(stack, image_id)
        formats.add(body["disk_format"])
        outcome = cache.fetch(CTXT, image_id)
        assert outcome.downloaded and outcome.bytes_downloaded == body["size"]
        data = pathlib.Path(cache.path_for(image_id)).read_bytes()
        assert body["os_hash_algo"] == "sha512"
        assert hashlib.sha512(data).hexdigest() == body["os_hash_value"]
        assert hashlib.md5(data).hexdigest() == body["checksum"]
        direct = stack.glance.get(f"{stack.glance_url}/v2/images/{image_id}/file", timeout=60)
        assert data == direct.content
    assert {"qcow2", "raw"} <= formats
    assert cache.partial_files() == []


def test_qcow2_sample_is_cached_as_raw_with_force_raw_images(stack: Any,
                                                              tmp_path: pathlib.Path) -> None:
    """Nova's default: the qcow2 is inspected, then converted; the base is raw, same disk."""
    cache = _cache(stack, tmp_path / "instances", force_raw_images=True)
    image_id = _qcow2_sample(stack)
    assert glance_image(stack, image_id)["disk_format"] == "qcow2"
    assert cache.fetch(CTXT, image_id).downloaded
    base = cache.path_for(image_id)
    direct = tmp_path / "direct.qcow2"
    direct.write_bytes(stack.glance.get(f"{stack.glance_url}/v2/images/{image_id}/file",
                                    timeout=60).content)
    info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", "-f", "raw", base],
                                     check=True, capture_output=True, text=True).stdout)
    assert info["format"] == "raw"
    subprocess.run(["qemu-img", "compare", "-f", "qcow2", "-F", "raw", str(direct), base],
                   check=True, capture_output=True)
    assert os.listdir(cache.base_dir) == [cache_name(image_id)]


def test_hit_touches_without_downloading(stack: Any, tmp_path: pathlib.Path) -> None:
    cache = _cache(stack, tmp_path / "instances")
    image_id = _image_ids(stack)[0]
    cache.fetch(CTXT, image_id)
    os.utime(cache.path_for(image_id), (1_000_000, 1_000_000))
    downloads: list[str] = []
    real_download = cache.source.download

    def counting(*args: Any, **kwargs: Any) -> int:
        downloads.append(args[1].id)
        return real_download(*args, **kwargs)

    cache.source.download = counting  # type: ignore[method-assign]
    assert not cache.fetch(CTXT, image_id).downloaded
    assert downloads == []
    assert os.stat(cache.path_for(image_id)).st_mtime > 1_000_000


def test_show_reports_glance_metadata(stack: Any) -> None:
    image_id = _image_ids(stack)[0]
    source = GlanceImageSource(make_conf(glance__api_servers=[stack.glance_url],
                                         **stack.glance_auth_options()))
    meta = source.show(CTXT, image_id)
    assert meta == ImageMeta.from_dict(glance_image(stack, image_id))
    assert meta.status == "active" and meta.size


def test_resume_uses_real_range_requests(stack: Any) -> None:
    """A transfer cut after the first chunk resumes from there with Glance's 206."""
    image_id = _image_ids(stack)[0]
    conf = make_conf(glance__api_servers=[stack.glance_url], **stack.glance_auth_options(),
                     glance__download_chunk_size=256 * 1024)
    source = GlanceImageSource(conf)
    source.retry_delay = 0.01
    meta = source.show(CTXT, image_id)
    statuses: list[int] = []
    real_get = http_into.get

    @contextlib.contextmanager
    def cut_first_body(*args: Any, **kwargs: Any) -> Iterator[http_into.Body]:
        with real_get(*args, **kwargs) as body:
            statuses.append(body.status)
            if len(statuses) == 1:  # the body breaks after its first read
                read, reads = body.readinto, [0]

                def broken(buffer: memoryview) -> int:
                    reads[0] += 1
                    if reads[0] > 1:
                        raise ConnectionResetError(104, "cut by the test")
                    return read(buffer)

                body.readinto = broken  # type: ignore[method-assign]
            yield body

    out = io.BytesIO()
    with mock.patch.object(http_into, "get", cut_first_body):
        assert source.download(CTXT, meta, out) == meta.size
    assert statuses == [200, 206]
    assert hashlib.sha512(out.getvalue()).hexdigest() == meta.os_hash_value


_FETCH = """
import json, os, sys, time
from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import ImageCache
from fleetcache.image import http_into
from fleetcache.image.glance import GlanceImageSource
from tests.unit.image.fixtures import make_conf
conf = make_conf(instances_path=sys.argv[1], glance__api_servers=[sys.argv[2]],
                 glance__download_chunk_size=65536,
                 **json.loads(os.environ["FLEETCACHE_IT_GLANCE_AUTH"]))
source = GlanceImageSource(conf)
calls = []
real = source.download

class Slow:  # the first chunk is written, then the download dawdles
    def __init__(self, writer):
        self.writer = writer
    def write(self, data):
        self.writer.write(data)
        time.sleep(float(sys.argv[4]))
        self.write = self.writer.write

def download(ctxt, meta, writer, progress=None):
    calls.append(1)
    return real(ctxt, meta, Slow(writer), progress)

source.download = download
outcome = ImageCache(conf, source).fetch(RequestContext(), sys.argv[3])
print(outcome.downloaded, len(calls))
"""


def test_two_processes_fetch_an_image_from_glance_once(stack: Any,
                                                       tmp_path: pathlib.Path) -> None:
    """The second process asks while the first is mid-download: it waits, then finds it."""
    image_id = _image_ids(stack)[-1]
    before = len(file_gets(stack, image_id))
    base = tmp_path / "inst" / "_base"

    def start(delay: float) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", _FETCH, str(tmp_path / "inst"),
                                 stack.glance_url, image_id, str(delay)],
                                stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "FLEETCACHE_IT_GLANCE_AUTH":
                                     json.dumps(stack.glance_auth_options())})

    def first_runs() -> None:
        assert first.poll() is None, "the first process ended before it downloaded"

    first = start(2.0)
    wait_for(lambda: base.is_dir() and any(p.name.startswith(".") for p in base.iterdir()),
             "the first process to start its download", 60, guard=first_runs, interval=0.01)
    second = start(0.0)
    outputs = [p.communicate(timeout=120)[0].strip() for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0]
    assert outputs == ["True 1", "False 0"]
    assert len(file_gets(stack, image_id, at_least=before + 1)) - before == 1
    data = (base / cache_name(image_id)).read_bytes()
    assert hashlib.sha512(data).hexdigest() == glance_image(stack, image_id)["os_hash_value"]


class Proxy:
    """A TCP proxy in front of Glance that damages what Glance sends, one connection at a time.

    ``cuts``: per new connection, close it after forwarding that many bytes to the client.
    ``flip_at``: flip one bit of the byte at that offset of each connection's reply stream.
    Offsets beyond 1 MiB fall only in image data: the JSON replies are ~1 KB (and the image's
    bytes come over a connection of their own, not the session's).
    """

    def __init__(self, upstream: str) -> None:
        url = urllib.parse.urlsplit(upstream)
        self.upstream = (url.hostname or "127.0.0.1", url.port or 80)
        self.cuts: list[int] = []
        self.flip_at: int | None = None
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            budget = self.cuts.pop(0) if self.cuts else None
            flip = self.flip_at
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, server, None, None),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, budget, flip),
                             daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, budget: int | None,
              flip: int | None) -> None:
        sent = 0
        try:
            while data := src.recv(256 * 1024):
                if flip is not None and sent <= flip < sent + len(data):
                    i = flip - sent
                    data = data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]
                if budget is not None and sent + len(data) >= budget:
                    dst.sendall(data[: budget - sent])
                    break
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture
def proxy(stack: Any) -> Iterator[Proxy]:
    p = Proxy(stack.glance_url)
    yield p
    p.close()


def _qcow2_sample(stack: Any) -> str:
    return _image_ids(stack)[0]  # qcow2 first: the larger sample (> 4 MiB)


def test_connections_cut_mid_body_resume_byte_identical(stack: Any, proxy: Proxy,
                                                        tmp_path: pathlib.Path) -> None:
    image_id = _qcow2_sample(stack)
    proxy.cuts = [1_500_000, 1_500_000]
    conf = make_conf(instances_path=str(tmp_path / "instances"), force_raw_images=False,
                     glance__api_servers=[proxy.url], glance__download_chunk_size=65536,
                     **stack.glance_auth_options())
    source = GlanceImageSource(conf)
    source.retry_delay = 0.01
    outcome = ImageCache(conf, source).fetch(CTXT, image_id)
    body = glance_image(stack, image_id)
    assert outcome.downloaded and outcome.bytes_downloaded == body["size"]
    data = pathlib.Path(ImageCache(conf, source).path_for(image_id)).read_bytes()
    assert hashlib.sha512(data).hexdigest() == body["os_hash_value"]
    assert proxy.connections >= 3  # the cut ones, then one that finished


def test_a_byte_corrupted_in_flight_fails_and_leaves_nothing(stack: Any, proxy: Proxy,
                                                             tmp_path: pathlib.Path) -> None:
    image_id = _qcow2_sample(stack)
    proxy.flip_at = 2 * 1024 * 1024
    conf = make_conf(instances_path=str(tmp_path / "instances"),
                     glance__api_servers=[proxy.url], **stack.glance_auth_options())
    cache = ImageCache(conf, GlanceImageSource(conf))
    with pytest.raises(exception.ImageFetchError, match="sha512 mismatch"):
        cache.fetch(CTXT, image_id)
    assert os.listdir(cache.base_dir) == []
