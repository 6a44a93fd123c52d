"""Unit tests of the compute image cache (fleetcache.compute.imagecache.cache)."""

from __future__ import annotations

import concurrent.futures
import hashlib
import io
import os
import pathlib
import stat
import subprocess
import sys
import threading
import time

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import CacheOutcome, ImageCache, cache_name, files, is_partial
from fleetcache.image.local import LocalImageSource, add_image
from fleetcache.image.source import ImageMeta, ProgressCallback, Writer
from tests import hostile_images
from tests.unit.compute.diskfixtures import Host
from tests.unit.compute.imagecache.test_odirect import refuse_o_direct
from tests.unit.image.fakeglance import FakeGlance
from tests.unit.image.fixtures import buffers_cannot_be_mapped, make_conf
from tests.waiting import wait_for

CTXT = RequestContext()
DATA = os.urandom(2 * 1024 * 1024 + 5)


class CountingSource(LocalImageSource):
    """The local source, counting downloads; can be held mid-download or fail."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.downloads = 0
        self.gate: threading.Event | None = None
        self.error: BaseException | None = None

    def download(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                 progress: ProgressCallback | None = None) -> int:
        self.downloads += 1
        if self.gate is not None:  # the temporary file exists by now
            assert self.gate.wait(10)
        if self.error is not None:
            raise self.error
        return super().download(ctxt, meta, writer, progress)


@pytest.fixture
def images(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "images"


@pytest.fixture
def cache(tmp_path: pathlib.Path, images: pathlib.Path) -> ImageCache:
    conf = make_conf(instances_path=str(tmp_path / "instances"),
                     image_source__local_directory=str(images))
    return ImageCache(conf, CountingSource(conf))


def _add(images: pathlib.Path, data: bytes = DATA, **kw: object) -> ImageMeta:
    return add_image(str(images), io.BytesIO(data), **kw)  # type: ignore[arg-type]


def _source(cache: ImageCache) -> CountingSource:
    assert isinstance(cache.source, CountingSource)
    return cache.source


def test_paths_follow_nova(cache: ImageCache, tmp_path: pathlib.Path) -> None:
    image_id = "a26887c6-c47b-4654-abb5-dfadf7d3f803"
    sha1 = hashlib.sha1(image_id.encode()).hexdigest()
    assert cache_name(image_id) == sha1
    assert cache.path_for(image_id) == str(tmp_path / "instances" / "_base" / sha1)
    assert cache.lock_path == str(tmp_path / "instances" / "locks")
    cache.conf.set_override("subdirectory_name", "_base_10.0.0.1", group="image_cache")
    assert cache.base_dir == str(tmp_path / "instances" / "_base_10.0.0.1")


def test_miss_downloads_verifies_and_publishes(cache: ImageCache,
                                               images: pathlib.Path) -> None:
    meta = _add(images)
    assert cache.fetch(CTXT, meta.id) == CacheOutcome(
        downloaded=True, bytes_downloaded=len(DATA), download_path="http",
        bytes_from_origin=len(DATA))
    path = pathlib.Path(cache.path_for(meta.id))
    assert path.read_bytes() == DATA
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert cache.partial_files() == []
    lock_file = pathlib.Path(cache.lock_path) / f"fleetcache-{cache_name(meta.id)}"
    assert lock_file.exists()


def test_hit_touches_and_does_not_download(cache: ImageCache, images: pathlib.Path) -> None:
    meta = _add(images)
    cache.fetch(CTXT, meta.id)
    path = cache.path_for(meta.id)
    os.utime(path, (1_000_000, 1_000_000))
    assert cache.fetch(CTXT, meta.id) == CacheOutcome(downloaded=False)
    assert os.stat(path).st_mtime > 1_000_000
    assert _source(cache).downloads == 1


class CaseInsensitiveSource(CountingSource):
    """A source that answers any spelling of an id with its own, as Glance on MySQL does."""

    def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        return super().show(ctxt, image_id.lower())


def test_every_spelling_of_an_id_finds_one_base(tmp_path: pathlib.Path,
                                                images: pathlib.Path) -> None:
    conf = make_conf(instances_path=str(tmp_path / "instances"),
                     image_source__local_directory=str(images))
    source = CaseInsensitiveSource(conf)
    cache = ImageCache(conf, source)
    meta = _add(images)
    upper = meta.id.upper()
    assert cache.fetch(CTXT, upper).downloaded
    assert cache.fetch(CTXT, upper) == CacheOutcome(downloaded=False)
    assert cache.fetch(CTXT, meta.id) == CacheOutcome(downloaded=False)
    assert source.downloads == 1
    assert os.listdir(cache.base_dir) == [cache_name(meta.id)]


def test_corrupt_download_leaves_nothing(cache: ImageCache, images: pathlib.Path) -> None:
    meta = _add(images)
    # bytes no longer match the hashes (the last one flipped: never equal to random data's)
    (images / meta.id).write_bytes(DATA[:-1] + bytes([DATA[-1] ^ 1]))
    with pytest.raises(exception.ImageFetchError, match="sha512 mismatch"):
        cache.fetch(CTXT, meta.id)
    assert os.listdir(cache.base_dir) == []


def test_host_out_of_memory_is_said_and_leaves_nothing(
        cache: ImageCache, images: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The local source hands over ``bytes`` of no whole page: the ``O_DIRECT`` writer
    stages them, and its staging buffer is what the host cannot map."""
    meta = _add(images)
    buffers_cannot_be_mapped(monkeypatch)
    with pytest.raises(exception.HostOutOfMemory, match="this host is out of memory"):
        cache.fetch(CTXT, meta.id)
    assert os.listdir(cache.base_dir) == []


def test_failed_transfer_leaves_nothing(cache: ImageCache, images: pathlib.Path) -> None:
    meta = _add(images)
    _source(cache).error = exception.ImageFetchError(image_id=meta.id, reason="cut")
    with pytest.raises(exception.ImageFetchError, match="cut"):
        cache.fetch(CTXT, meta.id)
    assert os.listdir(cache.base_dir) == []


def test_write_error_is_a_fetch_error_and_leaves_nothing(cache: ImageCache,
                                                         images: pathlib.Path) -> None:
    meta = _add(images)
    _source(cache).error = OSError(28, "No space left on device")
    with pytest.raises(exception.ImageFetchError, match="cannot write .*No space left"):
        cache.fetch(CTXT, meta.id)
    assert os.listdir(cache.base_dir) == []


def test_missing_image_is_not_found_and_leaves_nothing(cache: ImageCache) -> None:
    with pytest.raises(exception.ImageNotFound):
        cache.fetch(CTXT, "00000000-0000-4000-8000-000000000000")
    assert os.listdir(cache.base_dir) == []


def test_leftover_of_a_crash_is_removed_and_never_listed(cache: ImageCache,
                                                         images: pathlib.Path) -> None:
    meta = _add(images)
    cache.ensure_dirs()
    leftover = pathlib.Path(cache.base_dir) / f".{cache_name(meta.id)}.part-crash1"
    leftover.write_bytes(b"half")
    assert is_partial(leftover.name)
    assert cache.list_entries() == [] and cache.partial_files(meta.id) == [str(leftover)]
    cache.fetch(CTXT, meta.id)
    assert not leftover.exists()
    assert [e.name for e in cache.list_entries()] == [cache_name(meta.id)]


def test_partial_file_is_hidden_while_downloading(cache: ImageCache,
                                                  images: pathlib.Path) -> None:
    meta = _add(images)
    source = _source(cache)
    source.gate = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(cache.fetch, CTXT, meta.id)
        _wait_for_partial(pathlib.Path(cache.base_dir))
        assert not future.done()
        assert not os.path.exists(cache.path_for(meta.id))
        assert cache.list_entries() == []
        source.gate.set()
        assert future.result().downloaded


def test_concurrent_threads_download_once(cache: ImageCache, images: pathlib.Path) -> None:
    meta = _add(images)
    source = _source(cache)
    source.gate = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(cache.fetch, CTXT, meta.id) for _ in range(4)]
        _wait_for_partial(pathlib.Path(cache.base_dir))
        source.gate.set()
        outcomes = [f.result() for f in futures]
    assert source.downloads == 1
    assert sorted(o.downloaded for o in outcomes) == [False, False, False, True]
    assert pathlib.Path(cache.path_for(meta.id)).read_bytes() == DATA


def test_list_entries_and_disk_usage(cache: ImageCache, images: pathlib.Path) -> None:
    metas = [_add(images, DATA[: 1000 * (i + 1)]) for i in range(2)]
    for meta in metas:
        cache.fetch(CTXT, meta.id)
    entries = cache.list_entries()
    assert sorted(e.name for e in entries) == sorted(cache_name(m.id) for m in metas)
    assert sorted(e.size for e in entries) == [1000, 2000]
    assert cache.disk_usage() == sum(e.disk_usage for e in entries) > 0


_FETCH_IN_A_PROCESS = """
import sys
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import ImageCache
from fleetcache.image.glance import GlanceImageSource
from tests.unit.image.fixtures import make_conf
conf = make_conf(instances_path=sys.argv[1], glance__api_servers=[sys.argv[2]])
print(ImageCache(conf, GlanceImageSource(conf)).fetch(RequestContext(), sys.argv[3]).downloaded)
"""


def _wait_for_partial(cache_dir: pathlib.Path) -> None:
    """Until a download into ``cache_dir`` started (its partial file exists); polled often
    because the download it races lasts about a second."""
    wait_for(lambda: cache_dir.is_dir() and any(is_partial(p.name) for p in cache_dir.iterdir()),
             "a download to start", 30, interval=0.005)


def test_concurrent_processes_download_once(tmp_path: pathlib.Path) -> None:
    """A second process asking while the first downloads waits for it, then finds the file."""
    with FakeGlance() as glance:
        body = glance.add(DATA)
        glance.file_delay = 1.0

        def start() -> subprocess.Popen[str]:
            return subprocess.Popen(
                [sys.executable, "-c", _FETCH_IN_A_PROCESS, str(tmp_path / "inst"), glance.url,
                 body["id"]], stdout=subprocess.PIPE, text=True, cwd=os.getcwd())

        first = start()
        _wait_for_partial(tmp_path / "inst" / "_base")
        second = start()
        results = [p.communicate(timeout=60)[0].strip() for p in (first, second)]
        assert [p.returncode for p in (first, second)] == [0, 0]
        assert results == ["True", "False"]
        assert len(glance.file_gets(body["id"])) == 1
    cached = tmp_path / "inst" / "_base" / cache_name(body["id"])
    assert cached.read_bytes() == DATA


class RecordingCheck:
    def __init__(self, meta: ImageMeta, refuse_in: str | None = None) -> None:
        self.meta, self.refuse_in = meta, refuse_in
        self.fed = bytearray()
        self.finished: list[bytes] = []

    def feed(self, chunk: bytes) -> None:
        if self.refuse_in == "feed" and len(self.fed) > 0:
            raise exception.ImageFormatRejected(image_id=self.meta.id, reason="bad header")
        self.fed += chunk

    def finish(self, path: str) -> None:
        self.finished.append(pathlib.Path(path).read_bytes())
        if self.refuse_in == "finish":
            raise exception.ImageFormatRejected(image_id=self.meta.id, reason="backing file")

    def before_conversion(self, virtual_size: int) -> None:
        pass


def _checked_cache(cache: ImageCache,
                   refuse_in: str | None) -> tuple[ImageCache, list[RecordingCheck]]:
    """A cache like ``cache`` built with one recording check."""
    made: list[RecordingCheck] = []

    def factory(ctxt: RequestContext, meta: ImageMeta) -> RecordingCheck:
        made.append(RecordingCheck(meta, refuse_in))
        return made[-1]

    cache.source.chunk_size = 65536  # type: ignore[attr-defined]
    return ImageCache(cache.conf, cache.source, [factory]), made


def test_checks_see_every_byte_and_the_verified_file(cache: ImageCache,
                                                     images: pathlib.Path) -> None:
    meta = _add(images)
    checked, made = _checked_cache(cache, None)
    assert checked.fetch(CTXT, meta.id).downloaded
    assert [bytes(c.fed) for c in made] == [DATA]
    assert made[0].finished == [DATA]


def test_checks_are_fixed_when_the_cache_is_built(cache: ImageCache) -> None:
    checked, _made = _checked_cache(cache, None)
    assert cache.checks == () and len(checked.checks) == 1
    with pytest.raises(AttributeError):
        checked.checks = ()  # type: ignore[misc]


@pytest.mark.parametrize("refuse_in", ["feed", "finish"])
def test_a_refusing_check_leaves_nothing(cache: ImageCache, images: pathlib.Path,
                                         refuse_in: str) -> None:
    meta = _add(images)
    checked, _made = _checked_cache(cache, refuse_in)
    with pytest.raises(exception.ImageFormatRejected):
        checked.fetch(CTXT, meta.id)
    assert os.listdir(cache.base_dir) == []
    assert cache.index.names() == []


def test_writeback_starts_while_downloading_without_o_direct(
        cache: ImageCache, images: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the file system refuses O_DIRECT, buffered writes start their write-back early."""
    meta = _add(images)
    refuse_o_direct(monkeypatch)
    advised: list[tuple[int, int, int]] = []
    monkeypatch.setattr(files, "WRITEBACK_STEP", 512 * 1024)
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, off, n, adv: advised.append((off, n, adv)))
    cache.source.chunk_size = 256 * 1024  # type: ignore[attr-defined]
    cache.fetch(CTXT, meta.id)
    assert [(off, n) for off, n, _ in advised] == [(0, 512 * 1024), (512 * 1024, 512 * 1024),
                                                   (1024 * 1024, 512 * 1024),
                                                   (1536 * 1024, 512 * 1024)]
    assert {adv for *_, adv in advised} == {os.POSIX_FADV_DONTNEED}
    assert pathlib.Path(cache.path_for(meta.id)).read_bytes() == DATA


def test_stale_partials_go_but_downloads_under_way_stay(cache: ImageCache,
                                                        images: pathlib.Path) -> None:
    busy, dead = _add(images), _add(images, b"dead")
    cache.ensure_dirs()
    stale = pathlib.Path(cache.base_dir) / f".{cache_name(dead.id)}.part-killed"
    stale.write_bytes(b"half")
    source = _source(cache)
    source.gate = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(cache.fetch, CTXT, busy.id)
        _wait_for_partial(pathlib.Path(cache.base_dir))
        while len(cache.partial_files()) < 2:
            time.sleep(0.001)
        under_way = cache.partial_files(busy.id)
        assert cache.remove_stale_partials() == [str(stale)]
        assert cache.partial_files() == under_way
        source.gate.set()
        assert future.result().downloaded
    assert cache.partial_files() == []


def test_remove_if_older_rechecks_under_the_lock(cache: ImageCache,
                                                 images: pathlib.Path) -> None:
    old, fresh = _add(images), _add(images, b"fresh")
    for meta in (old, fresh):
        cache.fetch(CTXT, meta.id)
    os.utime(cache.path_for(old.id), (1_000, 1_000))
    cutoff = time.time() - 3600
    assert cache.remove_if_older(cache_name(fresh.id), cutoff) is False
    assert cache.remove_if_older(cache_name(old.id), cutoff) is True
    assert cache.remove_if_older(cache_name(old.id), cutoff) is False
    assert [e.name for e in cache.list_entries()] == [cache_name(fresh.id)]


def test_remove_if_older_waits_for_a_request_that_renews_the_lease(
        cache: ImageCache, images: pathlib.Path) -> None:
    meta = _add(images)
    cache.fetch(CTXT, meta.id)
    os.utime(cache.path_for(meta.id), (1_000, 1_000))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with cache.lock(meta.id):  # a request holds the lock and touches the file
            removal = pool.submit(cache.remove_if_older, cache_name(meta.id), 2_000.0)
            time.sleep(0.05)
            assert not removal.done()
            cache.touch(meta.id)
        assert removal.result() is False
    assert os.path.exists(cache.path_for(meta.id))


# -- the index: the cache is its one writer ---------------------------------------------------


def test_every_download_records_its_image_and_base_format(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)  # force_raw_images: a qcow2 image is cached as raw
    qcow2, raw = host.add_qcow2(), host.add_raw()
    host.cache.fetch(CTXT, qcow2)
    host.cache.fetch(CTXT, raw)
    assert host.index.get(cache_name(qcow2)) == {
        "image_id": qcow2, "disk_format": "qcow2", "base_format": "raw"}
    assert host.index.get(cache_name(raw)) == {
        "image_id": raw, "disk_format": "raw", "base_format": "raw"}


def test_a_refused_download_leaves_no_record(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    refused_early = host.add_raw()  # random bytes declared qcow2: refused while streaming
    meta = host.images / f"{refused_early}.json"
    meta.write_text(meta.read_text().replace('"raw"', '"qcow2"'))
    truncated = add_image(str(host.images), str(hostile_images.truncated_qcow2_body(tmp_path)),
                          disk_format="qcow2").id  # refused by qemu-img check, after the bytes
    for image in (refused_early, truncated):
        with pytest.raises(exception.ImageFormatRejected):
            host.cache.fetch(CTXT, image)
    assert host.index.names() == []


def test_a_hit_names_an_image_the_index_did_not_know(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = host.add_raw()
    host.cache.fetch(CTXT, image)
    os.unlink(os.path.join(host.index.directory, cache_name(image)))  # cached before the index
    assert host.cache.fetch(CTXT, image) == CacheOutcome(downloaded=False)
    assert host.index.get(cache_name(image)) == {
        "image_id": image, "disk_format": None, "base_format": None}


def test_a_record_that_cannot_be_written_does_not_fail_the_fetch(
        tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    host = Host(tmp_path)
    image = host.add_raw()
    pathlib.Path(host.index.directory).parent.mkdir(parents=True)
    pathlib.Path(host.index.directory).write_text("not a directory")
    assert host.cache.fetch(CTXT, image).downloaded
    assert host.cache.fetch(CTXT, image) == CacheOutcome(downloaded=False)
    assert host.base(image).exists()
    assert sum("Could not index cached image" in r.message for r in caplog.records) == 2


def test_base_format_is_the_recorded_one_else_the_planned_one_recorded(
        tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path, force_raw_images=False)
    qcow2, raw = host.add_qcow2(), host.add_raw()
    for image in (qcow2, raw):
        host.cache.fetch(CTXT, image)
    os.unlink(os.path.join(host.index.directory, cache_name(raw)))  # cached before the index
    with host.cache.lock(qcow2):
        assert host.cache.base_format(qcow2, "qcow2", "raw") == "qcow2"
    with host.cache.lock(raw):
        assert host.cache.base_format(raw, "raw", "raw") == "raw"
    assert host.index.get(cache_name(raw)) == {
        "image_id": raw, "disk_format": "raw", "base_format": "raw"}


def test_prune_index_removes_records_of_gone_files_only(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    kept, gone = host.add_raw(), host.add_raw()
    for image in (kept, gone):
        host.cache.fetch(CTXT, image)
    host.base(gone).unlink()  # removed behind the cache's back
    assert host.cache.prune_index() == [cache_name(gone)]
    assert host.index.names() == [cache_name(kept)]


def test_prune_index_skips_a_record_whose_image_is_locked(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = host.add_raw()
    host.cache.fetch(CTXT, image)
    host.base(image).unlink()
    with host.cache.lock(image):  # e.g. downloading it again
        assert host.cache.prune_index() == []
    assert host.index.names() == [cache_name(image)]


def test_remove_if_older_forgets_the_record_too(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = host.add_raw()
    host.cache.fetch(CTXT, image)
    assert host.cache.remove_if_older(cache_name(image), time.time() + 60) is True
    assert host.index.names() == []
