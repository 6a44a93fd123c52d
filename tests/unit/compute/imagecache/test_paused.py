"""Unit tests of paused downloads (fleetcache.compute.imagecache.paused) through the cache:
kept at the call's end time, hidden, resumed through the checks, dropped when they no longer
fit, aged out."""

from __future__ import annotations

import io
import os
import pathlib
import time

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import (
    DownloadPaused,
    DownloadTerms,
    ImageCache,
    ImageCacheManager,
)
from fleetcache.compute.manager import ComputeManager
from fleetcache.compute.virt.disk import DiskDriver
from fleetcache.image.local import LocalImageSource, add_image
from fleetcache.image.source import ImageMeta, ProgressCallback, Writer
from tests.unit.image.fixtures import make_conf

CTXT = RequestContext()
KiB, MiB = 1024, 1024 * 1024
SIZE = 1 * MiB
#: Pauses a download of ``SIZE`` about a quarter of the way.
RATE = 2 * MiB


class RangeSource(LocalImageSource):
    """The local source, noting the offset of every download it serves."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.offsets: list[int] = []

    def download_from(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                      offset: int, progress: ProgressCallback | None = None) -> int:
        self.offsets.append(offset)
        return super().download_from(ctxt, meta, writer, offset, progress)


@pytest.fixture
def cache(tmp_path: pathlib.Path) -> ImageCache:
    conf = make_conf(instances_path=str(tmp_path / "instances"),
                     image_source__backend="local",
                     image_source__local_directory=str(tmp_path / "images"),
                     glance__download_chunk_size=16 * KiB)
    return ImageCache(conf, RangeSource(conf))


def _source(cache: ImageCache) -> RangeSource:
    assert isinstance(cache.source, RangeSource)
    return cache.source


def _add(cache: ImageCache, data: bytes) -> str:
    directory = cache.conf.image_source.local_directory
    return add_image(directory, io.BytesIO(data), disk_format="raw").id


def _pause(cache: ImageCache, image_id: str, seconds: float = 0.15) -> DownloadPaused:
    terms = DownloadTerms(until=time.time() + seconds, bytes_per_second=RATE)
    with pytest.raises(DownloadPaused) as paused:
        cache.fetch(CTXT, image_id, terms=terms)
    return paused.value


def test_the_end_time_keeps_what_was_written_as_a_paused_download(cache: ImageCache) -> None:
    data = os.urandom(SIZE)
    image_id = _add(cache, data)
    paused = _pause(cache, image_id)
    assert 0 < paused.kept < SIZE
    assert (paused.bytes_downloaded, paused.bytes_resumed, paused.size) == (
        paused.kept, 0, SIZE)
    assert paused.reason == (f"paused at the call's end time: {paused.kept / MiB:.1f} of "
                             "1.0 MiB kept")
    with open(cache.paused_file(image_id), "rb") as f:
        assert f.read() == data[:paused.kept]
    assert not os.path.exists(cache.path_for(image_id))
    assert cache.partial_files() == []  # no download under way left behind


def test_a_paused_download_is_never_listed_served_reported_or_taken_for_a_crash(
        cache: ImageCache) -> None:
    image_id = _add(cache, os.urandom(SIZE))
    _pause(cache, image_id)
    assert cache.list_entries() == [] and cache.disk_usage() == 0
    assert cache.servable(image_id) is None
    assert ImageCacheManager(cache.conf, cache).cached_images() == ([], 0)
    assert cache.remove_stale_partials() == []  # start-up keeps it
    assert cache.paused_files() == [cache.paused_file(image_id)]


def test_the_next_call_resumes_from_the_kept_offset(cache: ImageCache) -> None:
    data = os.urandom(SIZE)
    image_id = _add(cache, data)
    kept = _pause(cache, image_id).kept
    outcome = cache.fetch(CTXT, image_id)
    assert outcome.downloaded
    assert (outcome.bytes_resumed, outcome.bytes_downloaded) == (kept, SIZE - kept)
    assert _source(cache).offsets == [0, kept]
    with open(cache.path_for(image_id), "rb") as f:
        assert f.read() == data
    assert cache.paused_files() == []


def test_a_resumed_download_that_pauses_again_keeps_everything(cache: ImageCache) -> None:
    image_id = _add(cache, os.urandom(4 * SIZE))
    first = _pause(cache, image_id)
    second = _pause(cache, image_id)
    assert second.bytes_resumed == first.kept
    assert second.kept == first.kept + second.bytes_downloaded > first.kept
    outcome = cache.fetch(CTXT, image_id)
    assert outcome.bytes_resumed == second.kept
    assert _source(cache).offsets == [0, first.kept, second.kept]


def test_a_tampered_paused_download_is_dropped_and_the_image_fetched_from_zero(
        cache: ImageCache) -> None:
    data = os.urandom(SIZE)
    image_id = _add(cache, data)
    kept = _pause(cache, image_id).kept
    with open(cache.paused_file(image_id), "r+b") as f:
        f.seek(kept // 2)
        byte = f.read(1)
        f.seek(kept // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    outcome = cache.fetch(CTXT, image_id)
    assert (outcome.bytes_resumed, outcome.bytes_downloaded) == (0, SIZE)
    assert _source(cache).offsets == [0, kept, 0]  # the resumption failed its hash
    with open(cache.path_for(image_id), "rb") as f:
        assert f.read() == data
    assert cache.paused_files() == [] and cache.partial_files() == []


def test_a_paused_download_replaced_by_a_link_is_dropped_and_the_image_fetched_from_zero(
        cache: ImageCache, tmp_path: pathlib.Path) -> None:
    """The link (to a file that holds the image's own first bytes) is never followed: the
    resume's open fails, and that is no error of the download."""
    data = os.urandom(SIZE)
    image_id = _add(cache, data)
    kept = _pause(cache, image_id).kept
    paused = pathlib.Path(cache.paused_file(image_id))
    elsewhere = tmp_path / "elsewhere"
    os.replace(paused, elsewhere)
    paused.symlink_to(elsewhere)
    outcome = cache.fetch(CTXT, image_id)
    assert (outcome.bytes_resumed, outcome.bytes_downloaded) == (0, SIZE)
    assert _source(cache).offsets == [0, 0]  # the link was neither read nor resumed from
    with open(cache.path_for(image_id), "rb") as f:
        assert f.read() == data
    assert cache.paused_files() == [] and cache.partial_files() == []
    assert not paused.is_symlink() and elsewhere.stat().st_size == kept


def test_a_paused_download_larger_than_the_image_is_dropped(cache: ImageCache) -> None:
    image_id = _add(cache, os.urandom(64 * KiB))
    cache.ensure_dirs()
    with open(cache.paused_file(image_id), "wb") as f:
        f.write(os.urandom(128 * KiB))
    outcome = cache.fetch(CTXT, image_id)
    assert (outcome.bytes_resumed, outcome.bytes_downloaded) == (0, 64 * KiB)
    assert _source(cache).offsets == [0]
    assert cache.paused_files() == []


def test_an_image_gone_from_the_source_loses_its_paused_download(cache: ImageCache) -> None:
    image_id = _add(cache, os.urandom(SIZE))
    _pause(cache, image_id)
    for name in os.listdir(cache.conf.image_source.local_directory):
        os.unlink(os.path.join(cache.conf.image_source.local_directory, name))
    with pytest.raises(exception.ImageNotFound):
        cache.fetch(CTXT, image_id)
    assert cache.paused_files() == []


def test_a_call_past_its_end_time_starts_nothing_and_keeps_what_was_there(
        cache: ImageCache) -> None:
    image_id = _add(cache, os.urandom(SIZE))
    kept = _pause(cache, image_id).kept
    with pytest.raises(DownloadPaused) as late:
        cache.fetch(CTXT, image_id, terms=DownloadTerms(until=time.time() - 1))
    assert (late.value.kept, late.value.bytes_downloaded) == (kept, 0)
    assert _source(cache).offsets == [0]
    assert os.path.getsize(cache.paused_file(image_id)) == kept


def test_the_ageing_pass_removes_old_paused_downloads_only(cache: ImageCache) -> None:
    old, new = _add(cache, os.urandom(SIZE)), _add(cache, os.urandom(SIZE))
    _pause(cache, old)
    _pause(cache, new)
    keep = cache.conf.image_cache.partial_keep_seconds
    past = time.time() - keep - 60
    os.utime(cache.paused_file(old), (past, past))
    result = ImageCacheManager(cache.conf, cache).run_pass()
    assert result.removed_paused == [cache.paused_file(old)]
    assert cache.paused_files() == [cache.paused_file(new)]


def test_the_ageing_pass_skips_a_paused_download_being_resumed(cache: ImageCache) -> None:
    image_id = _add(cache, os.urandom(SIZE))
    _pause(cache, image_id)
    os.utime(cache.paused_file(image_id), (1_000_000, 1_000_000))
    with cache.lock(image_id):
        assert cache.remove_old_paused(time.time()) == []
    assert cache.remove_old_paused(time.time()) == [cache.paused_file(image_id)]


def test_the_disk_floor_counts_a_resumed_downloads_growth(tmp_path: pathlib.Path) -> None:
    """The resumption writes the kept bytes again into its download file (the paused file
    stays until the publication): the floor sees every one of them, as any download's."""
    conf = make_conf(instances_path=str(tmp_path / "instances"),
                     image_source__backend="local",
                     image_source__local_directory=str(tmp_path / "images"),
                     glance__download_chunk_size=16 * KiB)
    fed: list[int] = []

    class Counting:
        def feed(self, chunk: bytes) -> None:
            fed.append(len(chunk))

        def finish(self, path: str) -> None: ...

        def before_conversion(self, virtual_size: int) -> None: ...

    cache = ImageCache(conf, RangeSource(conf), [lambda ctxt, meta: Counting()])
    image_id = _add(cache, os.urandom(SIZE))
    assert _pause(cache, image_id).kept
    fed.clear()
    cache.fetch(CTXT, image_id)
    assert sum(fed) == SIZE  # the kept bytes (re-written) and the rest


def _manager(tmp_path: pathlib.Path) -> tuple[ComputeManager, str, str]:
    conf = make_conf(instances_path=str(tmp_path / "instances"),
                     image_source__backend="local",
                     image_source__local_directory=str(tmp_path / "images"),
                     glance__download_chunk_size=16 * KiB)
    source = LocalImageSource(conf)
    directory = str(tmp_path / "images")
    first = add_image(directory, io.BytesIO(os.urandom(SIZE)), disk_format="raw").id
    second = add_image(directory, io.BytesIO(os.urandom(SIZE)), disk_format="raw").id
    return ComputeManager(conf, DiskDriver(conf, source)), first, second


def test_cache_images_answers_paused_with_the_bytes_and_resumes_next_time(
        tmp_path: pathlib.Path) -> None:
    manager, first, second = _manager(tmp_path)
    results = manager.cache_images(CTXT, [first, second], until=time.time() + 0.15,
                                   bytes_per_second=RATE)
    assert results[first]["state"] == results[second]["state"] == "paused"
    kept = results[first]["bytes_downloaded"]
    assert 0 < kept < SIZE
    assert results[first]["reason"] == (
        f"paused at the call's end time: {kept / MiB:.1f} of 1.0 MiB kept")
    assert results[second]["bytes_downloaded"] == 0  # not started by the end time
    again = manager.cache_images(CTXT, [first, second])
    assert again[first]["state"] == again[second]["state"] == "cached"
    assert again[first]["bytes_resumed"] == kept
    assert again[first]["bytes_downloaded"] == SIZE - kept
    assert "bytes_resumed" not in again[second]


def test_cache_images_refuses_malformed_terms(tmp_path: pathlib.Path) -> None:
    manager, first, _ = _manager(tmp_path)
    for terms in ({"until": "soon"}, {"bytes_per_second": 0}, {"bytes_per_second": 1.5}):
        result = manager.cache_images(CTXT, [first], **terms)  # type: ignore[arg-type]
        assert result[first]["state"] == "error", terms
