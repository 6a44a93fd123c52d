"""Unit tests of the ageing pass and the cache report (fleetcache.compute.imagecache.ageing)."""

from __future__ import annotations

import os
import pathlib
import threading
import time
import uuid

import pytest

from fleetcache.compute.imagecache import (
    DEFAULT_INTERVAL,
    PART_MARK,
    CachedImage,
    ImageCacheManager,
    cache_name,
    manager_interval,
)
from tests.unit.compute.diskfixtures import CTXT, Host, age
from tests.unit.image.fixtures import make_conf

MAX_AGE = 30


class Reports:
    def __init__(self) -> None:
        self.sent: list[tuple[list[CachedImage], int]] = []

    def __call__(self, images: list[CachedImage], usage: int) -> None:
        self.sent.append((images, usage))


def _manager(host: Host, reports: Reports | None = None) -> ImageCacheManager:
    host.conf.set_override("remove_unused_original_minimum_age_seconds", MAX_AGE,
                           group="image_cache")
    return ImageCacheManager(host.conf, host.cache, reports)


def _cached(host: Host, old: bool) -> str:
    image = host.add_raw()
    host.cache.fetch(CTXT, image)  # which indexes it
    if old:
        age(host.base(image), MAX_AGE + 10)
    return image


@pytest.mark.parametrize(("value", "expected"), [
    (2400, 2400.0), (0, DEFAULT_INTERVAL), (1, 1.0), (-1, None)])
def test_manager_interval(value: int, expected: float | None) -> None:
    assert manager_interval(make_conf(image_cache__manager_interval=value)) == expected


def test_pass_removes_old_unused_images_only(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    old, young, backing = _cached(host, True), _cached(host, False), _cached(host, True)
    host.disks.create(CTXT, str(uuid.uuid4()), backing)
    age(host.base(backing), MAX_AGE + 10)  # creating the disk touched it
    usage = host.base(old).stat().st_blocks * 512
    result = _manager(host).run_pass()
    assert result.removed == [cache_name(old)]
    assert result.freed_bytes == usage
    assert result.in_use == [cache_name(backing)]
    assert result.kept == [cache_name(young)]
    assert not host.base(old).exists()
    assert host.base(young).exists() and host.base(backing).exists()
    assert host.index.get(cache_name(old)) is None  # pruned with its file


def test_a_flat_copy_does_not_keep_its_base(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path, libvirt__images_type="flat")
    image = _cached(host, True)
    result = host.disks.create(CTXT, str(uuid.uuid4()), image)
    age(host.base(image), MAX_AGE + 10)
    assert _manager(host).run_pass().removed == [cache_name(image)]
    assert os.path.exists(result["path"])


def test_touch_renews_the_lease(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = _cached(host, True)
    host.cache.fetch(CTXT, image)  # a pre-cache hit touches it
    assert _manager(host).run_pass().removed == []
    assert host.base(image).exists()


def test_disabled_removal_keeps_everything(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path, image_cache__remove_unused_base_images=False)
    image = _cached(host, True)
    assert _manager(host).run_pass().removed == []
    assert host.base(image).exists()


def test_an_unknown_disk_stops_every_removal(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = _cached(host, True)
    broken = host.instance_dir(str(uuid.uuid4()))
    broken.mkdir(parents=True)
    (broken / "disk").write_bytes(b"QFI\xfb" + b"\xff" * 60)
    result = _manager(host).run_pass()
    assert (result.removed, result.unknown_disks) == ([], [str(broken)])
    assert host.base(image).exists()


def test_downloads_under_way_are_never_touched(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    partial = pathlib.Path(host.cache.base_dir) / f".{cache_name('x')}{PART_MARK}abc"
    partial.write_bytes(b"half")
    age(partial, MAX_AGE + 10)
    with host.cache.lock("x"):  # its download holds the lock
        assert _manager(host).run_pass().removed == []
    assert partial.exists()


def test_an_image_whose_lock_is_held_is_rechecked_after(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = _cached(host, True)
    manager = _manager(host)
    results = []
    with host.cache.lock(image):  # a request holds it...
        runner = threading.Thread(target=lambda: results.append(manager.run_pass()))
        runner.start()
        time.sleep(0.3)
        assert runner.is_alive() and host.base(image).exists()
        os.utime(host.base(image))  # ...and touches it before letting go
    runner.join(10)
    assert results[0].removed == [] and host.base(image).exists()


def test_report_names_indexed_images_and_counts_all_usage(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    named = _cached(host, False)
    unnamed = host.add_raw()
    host.cache.fetch(CTXT, unnamed)
    os.unlink(os.path.join(host.index.directory, cache_name(unnamed)))  # its record was lost
    reports = Reports()
    _manager(host, reports).run_pass()
    [(images, usage)] = reports.sent
    st = host.base(named).stat()
    assert images == [{"image_id": named, "size": st.st_size, "last_used": st.st_mtime}]
    assert usage == st.st_blocks * 512 + host.base(unnamed).stat().st_blocks * 512


def test_report_errors_are_logged_not_raised(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)

    def broken(images: list[CachedImage], usage: int) -> None:
        raise RuntimeError("conductor gone")

    manager = ImageCacheManager(host.conf, host.cache, broken)
    manager.report()
    assert manager.run_pass().removed == []


def test_report_carries_each_pin_while_it_lasts(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    pinned, ended, plain = (_cached(host, False) for _ in range(3))
    until = time.time() + 3600
    assert host.cache.pin(pinned, until)
    assert host.cache.pin(ended, time.time() - 1)  # not pruned yet: no pass ran
    reports = Reports()
    _manager(host, reports).report()
    [(images, _usage)] = reports.sent
    by_id = {i["image_id"]: i for i in images}
    assert by_id[pinned]["pinned_until"] == until
    assert "pinned_until" not in by_id[ended] and "pinned_until" not in by_id[plain]
