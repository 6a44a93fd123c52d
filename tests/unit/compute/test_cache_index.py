"""Unit tests of the cache index (fleetcache.compute.cache_index)."""

from __future__ import annotations

import os
import pathlib

import pytest

from fleetcache.common import exception
from fleetcache.compute.imagecache import cache_name
from fleetcache.image.local import add_image
from tests import hostile_images
from tests.unit.compute.diskfixtures import CTXT, Host


def test_record_and_get(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    record = host.index.record("img-1", "qcow2", "raw")
    assert record == {"image_id": "img-1", "disk_format": "qcow2", "base_format": "raw"}
    assert host.index.get(cache_name("img-1")) == record
    assert host.index.get(cache_name("other")) is None


def test_lives_beside_the_cache_not_in_it(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    host.index.record("img-1")
    assert not os.listdir(host.cache.base_dir)
    assert host.index.directory == str(tmp_path / "instances" / "image_ids" / "_base")


def test_record_keeps_known_formats(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    host.index.record("img-1", "qcow2", "qcow2")
    assert host.index.record("img-1") == {
        "image_id": "img-1", "disk_format": "qcow2", "base_format": "qcow2"}
    assert host.index.record("img-1", base_format="raw")["base_format"] == "raw"


def test_bad_or_mismatched_records_are_ignored(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    os.makedirs(host.index.directory)
    directory = pathlib.Path(host.index.directory)
    (directory / cache_name("a")).write_text("{not json")
    (directory / cache_name("b")).write_text('{"image_id": "not-b"}')
    assert host.index.get(cache_name("a")) is None
    assert host.index.get(cache_name("b")) is None


def test_prune_removes_records_of_gone_files_only(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    kept = host.add_raw()
    host.cache.fetch(CTXT, kept)
    host.index.record(kept)
    host.index.record("gone")
    assert host.index.prune() == [cache_name("gone")]
    assert host.index.get(cache_name(kept)) is not None
    assert host.index.get(cache_name("gone")) is None


def test_prune_skips_a_record_whose_image_is_locked(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    host.index.record("downloading")
    with host.cache.lock("downloading"):
        assert host.index.prune() == []
    assert host.index.get(cache_name("downloading")) is not None


def test_every_download_records_its_image_and_base_format(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)  # force_raw_images: a qcow2 image is cached as raw
    host.cache.checks.append(host.index.download_check)
    qcow2, raw = host.add_qcow2(), host.add_raw()
    host.cache.fetch(CTXT, qcow2)
    host.cache.fetch(CTXT, raw)
    assert host.index.get(cache_name(qcow2)) == {
        "image_id": qcow2, "disk_format": "qcow2", "base_format": "raw"}
    assert host.index.get(cache_name(raw)) == {
        "image_id": raw, "disk_format": "raw", "base_format": "raw"}


def test_a_refused_download_leaves_at_most_a_prunable_record(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    host.cache.checks.append(host.index.download_check)
    refused_early = host.add_raw()  # random bytes declared qcow2: refused while streaming
    meta = host.images / f"{refused_early}.json"
    meta.write_text(meta.read_text().replace('"raw"', '"qcow2"'))
    truncated = add_image(str(host.images), str(hostile_images.truncated_qcow2_body(tmp_path)),
                          disk_format="qcow2").id  # refused by qemu-img check, after finish
    for image in (refused_early, truncated):
        with pytest.raises(exception.ImageFormatRejected):
            host.cache.fetch(CTXT, image)
    assert host.index.get(cache_name(refused_early)) is None
    assert host.index.prune() == [cache_name(truncated)]
