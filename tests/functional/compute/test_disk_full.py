"""A full disk under ``instances_path`` (a real 3 MiB tmpfs): the download fails with a clear
error, its temporary file is removed, and what was cached before stays intact.

Mounting needs root (CAP_SYS_ADMIN); without it the test fails, saying so.
"""

from __future__ import annotations

import hashlib
import io
import os
import pathlib
import subprocess
from collections.abc import Iterator

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import cache_name
from fleetcache.compute.virt.disk import DiskDriver
from fleetcache.image.local import add_image
from tests.unit.image.fixtures import make_conf


@pytest.fixture
def small_disk(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    mountpoint = tmp_path / "small"
    mountpoint.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mountpoint)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (needs root): {proc.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


def test_disk_full_fails_cleanly_and_keeps_the_cache(tmp_path: pathlib.Path,
                                                     small_disk: pathlib.Path) -> None:
    images = tmp_path / "images"
    small = add_image(str(images), io.BytesIO(os.urandom(1024 * 1024)))
    big = add_image(str(images), io.BytesIO(os.urandom(4 * 1024 * 1024)))
    driver = DiskDriver(make_conf(instances_path=str(small_disk), image_source__backend="local",
                                  image_source__local_directory=str(images)))
    driver.init_host("host1")
    ctxt = RequestContext()
    assert driver.cache_image(ctxt, small.id).downloaded

    with pytest.raises(exception.ImageFetchError,
                       match=rf"Could not fetch image {big.id}: cannot write .*"
                             r"No space left on device"):
        driver.cache_image(ctxt, big.id)

    base = small_disk / "_base"
    assert os.listdir(base) == [cache_name(small.id)]
    kept = (base / cache_name(small.id)).read_bytes()
    assert hashlib.sha512(kept).hexdigest() == small.os_hash_value
    assert driver.cache_image(ctxt, small.id).downloaded is False
