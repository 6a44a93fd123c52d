"""The disk-space floor on a real 16 MiB tmpfs under ``instances_path``
(``[image_cache] disk_free_floor``): an image that would bring the free space below the floor
is ``skipped`` with the reason ``disk``, before its download when its size says so and during
it when its size is not known, never leaving a partial file nor filling the disk.

Mounting needs root (CAP_SYS_ADMIN); without it the test fails, saying so.
"""

from __future__ import annotations

import dataclasses
import io
import os
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import cache_name, is_partial
from fleetcache.compute.imagecache.disk_floor import Floor
from fleetcache.compute.manager import ComputeManager
from fleetcache.compute.virt.disk import DiskDriver
from fleetcache.image.local import LocalImageSource, add_image
from fleetcache.image.source import ImageMeta, ProgressCallback, Writer
from tests.unit.image.fixtures import make_conf

MiB = 1 << 20
CTXT = RequestContext()


class SizelessSource(LocalImageSource):
    """The local source, not telling image sizes (as an image service may not), counting
    downloads."""

    downloads = 0

    def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        return dataclasses.replace(super().show(ctxt, image_id), size=None)

    def download(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                 progress: ProgressCallback | None = None) -> int:
        type(self).downloads += 1
        return super().download(ctxt, meta, writer, progress)


@pytest.fixture
def small_disk(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    mountpoint = tmp_path / "small"
    mountpoint.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mountpoint)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (needs root): {proc.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


def _manager(tmp_path: pathlib.Path, disk: pathlib.Path, floor: str,
             sizeless: bool = False, **overrides: object) -> ComputeManager:
    conf = make_conf(instances_path=str(disk), image_source__backend="local",
                     image_source__local_directory=str(tmp_path / "images"),
                     image_cache__disk_free_floor=floor, **overrides)
    source = SizelessSource(conf) if sizeless else LocalImageSource(conf)
    driver = DiskDriver(conf, source)
    driver.init_host("host1")
    return ComputeManager(conf, driver)


def _add(tmp_path: pathlib.Path, mib: int) -> str:
    return add_image(str(tmp_path / "images"), io.BytesIO(os.urandom(mib * MiB))).id


def _free(disk: pathlib.Path) -> int:
    st = os.statvfs(disk)
    return st.f_bavail * st.f_frsize


def _partials(disk: pathlib.Path) -> list[str]:
    return [n for n in os.listdir(disk / "_base") if is_partial(n)]


@pytest.mark.parametrize(("text", "floor"), [
    ("0", Floor("0")), ("4096", Floor("4096", bytes=4096)), ("500M", Floor("500M", 500 * MiB)),
    ("2G", Floor("2G", bytes=2 << 30)), ("1GiB", Floor("1GiB", bytes=1 << 30)),
    ("10%", Floor("10%", percent=10.0)), (" 2.5 % ", Floor(" 2.5 % ", percent=2.5)),
])
def test_floor_parses_bytes_units_and_percentages(text: str, floor: Floor) -> None:
    assert Floor.parse(text) == floor


@pytest.mark.parametrize("text", ["", "-1", "ten", "5X", "100%", "1.5G"])
def test_a_bad_floor_is_a_configuration_error(text: str) -> None:
    with pytest.raises(exception.InvalidConfiguration, match="disk_free_floor"):
        Floor.parse(text)


def test_an_image_that_would_cross_the_floor_is_skipped_before_its_download(
        tmp_path: pathlib.Path, small_disk: pathlib.Path) -> None:
    manager = _manager(tmp_path, small_disk, "4M")
    first, second = _add(tmp_path, 8), _add(tmp_path, 8)
    assert manager.cache_images(CTXT, [first])[first]["state"] == "cached"
    free = _free(small_disk)

    result = manager.cache_images(CTXT, [second])[second]
    assert (result["state"], result["reason"]) == ("skipped", "disk")
    assert not (small_disk / "_base" / cache_name(second)).exists()
    assert _partials(small_disk) == [] and _free(small_disk) == free
    assert manager.cache_images(CTXT, [first])[first]["state"] == "existing"


def test_a_download_of_unknown_size_stops_at_the_floor_and_leaves_nothing(
        tmp_path: pathlib.Path, small_disk: pathlib.Path) -> None:
    manager = _manager(tmp_path, small_disk, "4M", sizeless=True)
    big = _add(tmp_path, 14)
    free = _free(small_disk)
    lowest = [free]

    real_statvfs = os.statvfs

    def watching_statvfs(path: str) -> os.statvfs_result:
        st = real_statvfs(path)
        lowest[0] = min(lowest[0], st.f_bavail * st.f_frsize)
        return st

    SizelessSource.downloads = 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "statvfs", watching_statvfs)
        result = manager.cache_images(CTXT, [big])[big]
    assert (result["state"], result["reason"]) == ("skipped", "disk")
    assert SizelessSource.downloads == 1  # refused during the download, not before
    assert lowest[0] >= 4 * MiB  # the floor held all along
    assert _partials(small_disk) == [] and _free(small_disk) == free
    assert not (small_disk / "_base" / cache_name(big)).exists()


def test_a_compressed_qcow2_is_refused_at_the_size_it_converts_to(
        tmp_path: pathlib.Path, small_disk: pathlib.Path) -> None:
    """A 32 MiB disk compressed into a qcow2 of well under 1 MiB, with no ``virtual_size``
    from the image service: the floor is held at the size ``qemu-img info`` reads, before
    ``qemu-img convert`` writes anything."""
    raw, qcow2 = tmp_path / "ones.raw", tmp_path / "ones.qcow2"
    raw.write_bytes(b"\x01" * (32 * MiB))
    subprocess.run(["qemu-img", "convert", "-q", "-c", "-f", "raw", "-O", "qcow2", str(raw),
                    str(qcow2)], check=True)
    assert qcow2.stat().st_size < MiB
    image = add_image(str(tmp_path / "images"), str(qcow2), disk_format="qcow2").id
    manager = _manager(tmp_path, small_disk, "4M", libvirt__images_type="flat")
    free = _free(small_disk)

    result = manager.cache_images(CTXT, [image])[image]
    assert (result["state"], result["reason"]) == ("skipped", "disk")
    assert not (small_disk / "_base" / cache_name(image)).exists()
    assert _partials(small_disk) == [] and _free(small_disk) == free


def test_a_percentage_floor(tmp_path: pathlib.Path, small_disk: pathlib.Path) -> None:
    manager = _manager(tmp_path, small_disk, "50%")  # 8 MiB of 16
    fits, too_big = _add(tmp_path, 6), _add(tmp_path, 3)
    assert manager.cache_images(CTXT, [fits])[fits]["state"] == "cached"
    result = manager.cache_images(CTXT, [too_big])[too_big]
    assert (result["state"], result["reason"]) == ("skipped", "disk")


def test_without_a_floor_the_full_disk_is_an_error_and_nothing_is_left(
        tmp_path: pathlib.Path, small_disk: pathlib.Path) -> None:
    manager = _manager(tmp_path, small_disk, "0")
    huge = _add(tmp_path, 20)
    result = manager.cache_images(CTXT, [huge])[huge]
    assert result["state"] == "error" and "No space left on device" in (result["reason"] or "")
    assert _partials(small_disk) == []
