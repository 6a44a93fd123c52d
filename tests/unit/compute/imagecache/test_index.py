"""Unit tests of the cache index (fleetcache.compute.imagecache.index); how the cache writes it
is in test_cache.py."""

from __future__ import annotations

import os
import pathlib

from fleetcache.compute.imagecache import CacheIndex, cache_name
from tests.unit.image.fixtures import make_conf


def _index(tmp_path: pathlib.Path) -> CacheIndex:
    return CacheIndex(make_conf(instances_path=str(tmp_path / "instances")))


def test_record_and_get(tmp_path: pathlib.Path) -> None:
    index = _index(tmp_path)
    record = index.record("img-1", "qcow2", "raw")
    assert record == {"image_id": "img-1", "disk_format": "qcow2", "base_format": "raw"}
    assert index.get(cache_name("img-1")) == record
    assert index.get(cache_name("other")) is None


def test_lives_beside_the_cache_not_in_it(tmp_path: pathlib.Path) -> None:
    index = _index(tmp_path)
    index.record("img-1")
    assert index.directory == str(tmp_path / "instances" / "image_ids" / "_base")
    assert os.listdir(tmp_path / "instances") == ["image_ids"]


def test_record_keeps_known_formats(tmp_path: pathlib.Path) -> None:
    index = _index(tmp_path)
    index.record("img-1", "qcow2", "qcow2")
    assert index.record("img-1") == {
        "image_id": "img-1", "disk_format": "qcow2", "base_format": "qcow2"}
    assert index.record("img-1", base_format="raw")["base_format"] == "raw"


def test_an_unchanged_record_is_not_rewritten(tmp_path: pathlib.Path) -> None:
    index = _index(tmp_path)
    index.record("img-1", "raw", "raw")
    path = pathlib.Path(index.directory) / cache_name("img-1")
    os.utime(path, (1_000, 1_000))
    index.record("img-1")
    index.record("img-1", "raw", "raw")
    assert path.stat().st_mtime == 1_000


def test_bad_or_mismatched_records_are_ignored(tmp_path: pathlib.Path) -> None:
    index = _index(tmp_path)
    os.makedirs(index.directory)
    directory = pathlib.Path(index.directory)
    (directory / cache_name("a")).write_text("{not json")
    (directory / cache_name("b")).write_text('{"image_id": "not-b"}')
    assert index.get(cache_name("a")) is None
    assert index.get(cache_name("b")) is None


def test_names_leave_out_records_being_written_and_remove_forgets(
        tmp_path: pathlib.Path) -> None:
    index = _index(tmp_path)
    assert index.names() == []
    index.record("img-1")
    index.record("img-2")
    (pathlib.Path(index.directory) / f".{cache_name('img-3')}.tmp").write_text("{")
    assert index.names() == sorted([cache_name("img-1"), cache_name("img-2")])
    index.remove(cache_name("img-1"))
    index.remove(cache_name("never-recorded"))
    assert index.names() == [cache_name("img-2")]
