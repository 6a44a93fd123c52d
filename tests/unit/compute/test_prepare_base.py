"""imagebackend.prepare_base: a durable conversion (``-t none`` where O_DIRECT works, else
``-t writeback``), no second inspection of the download, a time limit, nothing left behind."""

from __future__ import annotations

import errno
import os
import pathlib
import time
from typing import Any

import pytest

from fleetcache.common import exception
from fleetcache.compute import imagebackend
from fleetcache.compute.imagebackend import disks
from fleetcache.compute.imagebackend.selection import DiskPlan
from fleetcache.image import qemu
from tests import hostile_images as corpus
from tests.unit.compute.imagecache.test_download import CTXT, _add, _cache
from tests.unit.image import fixtures

PLAN = DiskPlan(disk_format="qcow2", backend="flat", mapped=False, source_format="qcow2",
                base_format="raw", convert_timeout=600)


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    recorded: list[tuple[str, ...]] = []
    real = qemu.execute

    def spy(*cmd: str, **kwargs: Any) -> Any:
        recorded.append(cmd)
        return real(*cmd, **kwargs)

    monkeypatch.setattr(qemu, "execute", spy)
    return recorded


def _expected_raw(tmp_path: pathlib.Path, image: pathlib.Path) -> bytes:
    reference = tmp_path / "reference.raw"
    corpus.qemu_img("convert", "-f", "qcow2", "-O", "raw", str(image), str(reference))
    return reference.read_bytes()


def test_converts_with_direct_io_and_out_of_order_writes(
        tmp_path: pathlib.Path, commands: list[tuple[str, ...]]) -> None:
    image = corpus.qcow2_with_data(tmp_path)
    expected = _expected_raw(tmp_path, image)
    base_dir = tmp_path / "_base"
    base_dir.mkdir()
    downloaded = base_dir / ".abc.part-1"
    os.replace(image, downloaded)
    imagebackend.prepare_base(PLAN, str(downloaded), str(base_dir / "abc"))
    assert commands == [("qemu-img", "convert", "-f", "qcow2", "-O", "raw", "-t", "none", "-W",
                         str(downloaded), f"{downloaded}.converted")]
    assert (base_dir / "abc").read_bytes() == expected
    assert os.listdir(base_dir) == ["abc"]


def test_falls_back_to_writeback_without_direct_io(
        tmp_path: pathlib.Path, commands: list[tuple[str, ...]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(disks, "supports_direct_io", lambda path: False)
    image = corpus.qcow2_with_data(tmp_path)
    expected = _expected_raw(tmp_path, image)
    base = tmp_path / "abc"
    imagebackend.prepare_base(PLAN, str(image), str(base))
    assert commands[0][6:9] == ("-t", "writeback", "-W")
    assert base.read_bytes() == expected
    assert not image.exists() and not pathlib.Path(f"{image}.converted").exists()


def test_supports_direct_io_writes_one_aligned_block(tmp_path: pathlib.Path) -> None:
    probe = tmp_path / "probe"
    assert disks.supports_direct_io(str(probe))
    assert probe.stat().st_size == 4096


def test_supports_direct_io_is_false_when_the_file_system_refuses_it(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = os.open

    def no_direct(path: str, flags: int, *args: Any) -> int:
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", no_direct)
    assert not disks.supports_direct_io(str(tmp_path / "probe"))


def test_download_path_inspects_once_and_converts_once(
        tmp_path: pathlib.Path, commands: list[tuple[str, ...]]) -> None:
    """The download is inspected while it streams and once on file (info, check); the
    conversion does not inspect the same bytes again."""
    cache = _cache(tmp_path, libvirt__images_type="flat")
    image = corpus.qcow2_with_data(tmp_path)
    expected = _expected_raw(tmp_path, image)
    meta = _add(tmp_path, image, disk_format="qcow2")
    cache.fetch(CTXT, meta.id)
    assert [cmd[1] for cmd in commands] == ["info", "check", "convert"]
    assert pathlib.Path(cache.path_for(meta.id)).read_bytes() == expected


def test_a_conversion_over_its_time_limit_is_killed_and_leaves_nothing(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixtures.hanging_qemu_img(tmp_path, monkeypatch, "convert")
    base_dir = tmp_path / "_base"
    base_dir.mkdir()
    downloaded = base_dir / ".abc.part-1"
    os.replace(corpus.qcow2_with_data(tmp_path), downloaded)
    plan = DiskPlan(disk_format="qcow2", backend="flat", mapped=False, source_format="qcow2",
                    base_format="raw", convert_timeout=1)
    began = time.monotonic()
    with pytest.raises(exception.QemuImgError,
                       match=r"limit of 1 s \(\[libvirt\] images_convert_timeout\)"):
        imagebackend.prepare_base(plan, str(downloaded), str(base_dir / "abc"))
    assert time.monotonic() - began < 5
    assert os.listdir(base_dir) == []


def test_the_cache_refuses_an_image_whose_conversion_is_too_slow(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reason the host reports as the image's ``error`` names the limit and its option."""
    cache = _cache(tmp_path, libvirt__images_type="flat", libvirt__images_convert_timeout=1)
    meta = _add(tmp_path, corpus.qcow2_with_data(tmp_path), disk_format="qcow2")
    fixtures.hanging_qemu_img(tmp_path, monkeypatch, "convert")
    began = time.monotonic()
    with pytest.raises(exception.ImageFetchError) as caught:
        cache.fetch(CTXT, meta.id)
    assert time.monotonic() - began < 10
    assert str(caught.value).endswith(
        "cannot convert it from qcow2 to raw for the flat backend: qemu-img convert failed: "
        "did not finish within the time limit of 1 s ([libvirt] images_convert_timeout) and "
        "was killed")
    assert os.listdir(cache.base_dir) == []
