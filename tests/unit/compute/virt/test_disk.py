"""Unit tests of the disk virt driver (fleetcache.compute.virt.disk)."""

from __future__ import annotations

import io
import os
import pathlib

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import cache_name
from fleetcache.compute.virt.disk import DiskDriver
from fleetcache.image.local import LocalImageSource, add_image
from tests.unit.image.fixtures import make_conf


def _driver(tmp_path: pathlib.Path, instances: pathlib.Path) -> DiskDriver:
    return DiskDriver(make_conf(instances_path=str(instances), image_source__backend="local",
                                image_source__local_directory=str(tmp_path / "images")))


def test_init_host_creates_cache_and_lock_directories(tmp_path: pathlib.Path) -> None:
    _driver(tmp_path, tmp_path / "instances").init_host("host1")
    assert (tmp_path / "instances" / "_base").is_dir()
    assert (tmp_path / "instances" / "locks").is_dir()
    assert os.listdir(tmp_path / "instances" / "_base") == []


def test_init_host_fails_clearly_when_instances_path_is_unusable(
        tmp_path: pathlib.Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    driver = _driver(tmp_path, blocker / "instances")
    with pytest.raises(exception.InvalidConfiguration,
                       match=r"\[DEFAULT\] instances_path '.*a-file/instances' is not usable "
                       r"on host host1: Not a directory"):
        driver.init_host("host1")


def test_image_source_comes_from_configuration(tmp_path: pathlib.Path) -> None:
    assert isinstance(_driver(tmp_path, tmp_path / "i").image_cache.source, LocalImageSource)


def test_unknown_image_source_stops_the_driver(tmp_path: pathlib.Path) -> None:
    with pytest.raises(exception.InvalidConfiguration, match="known sources"):
        DiskDriver(make_conf(image_source__backend="nosuch"))


def test_cache_image_fills_base_directory(tmp_path: pathlib.Path) -> None:
    meta = add_image(str(tmp_path / "images"), io.BytesIO(b"x" * 4096))
    driver = _driver(tmp_path, tmp_path / "instances")
    driver.init_host("host1")
    outcome = driver.cache_image(RequestContext(), meta.id)
    assert outcome.cached and outcome.bytes_downloaded == 4096
    cached = tmp_path / "instances" / "_base" / cache_name(meta.id)
    assert cached.read_bytes() == b"x" * 4096


def test_init_host_removes_partials_of_a_killed_predecessor(tmp_path: pathlib.Path) -> None:
    base = tmp_path / "instances" / "_base"
    base.mkdir(parents=True)
    (base / f".{cache_name('img')}.part-abc123").write_bytes(b"half")
    _driver(tmp_path, tmp_path / "instances").init_host("host1")
    assert os.listdir(base) == []
