"""Helpers of the instance disk and cache ageing tests: a cache on ``tmp_path``, images."""

from __future__ import annotations

import errno
import io
import os
import pathlib
import subprocess
from typing import Any

import pytest

from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import ImageCache, download
from fleetcache.compute.instance_disks import InstanceDisks
from fleetcache.image.local import LocalImageSource, add_image
from tests.unit.image.fixtures import make_conf

CTXT = RequestContext()
MiB = 1024 * 1024


class Host:
    """One compute's cache (and its index) and instance disks, in ``tmp_path``."""

    def __init__(self, tmp_path: pathlib.Path, **overrides: Any) -> None:
        self.tmp_path = tmp_path
        self.images = tmp_path / "images"
        self.conf = make_conf(instances_path=str(tmp_path / "instances"),
                              image_source__backend="local",
                              image_source__local_directory=str(self.images), **overrides)
        self.cache = ImageCache(self.conf, LocalImageSource(self.conf))
        self.cache.ensure_dirs()
        self.index = self.cache.index
        self.disks = InstanceDisks(self.conf, self.cache)

    def add_raw(self, size: int = MiB) -> str:
        data = os.urandom(64 * 1024) * (size // (64 * 1024))
        return add_image(str(self.images), io.BytesIO(data), disk_format="raw").id

    def add_qcow2(self, virtual: str = "16M") -> str:
        path = self.tmp_path / f"src-{os.urandom(4).hex()}.qcow2"
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), virtual],
                       check=True)
        return add_image(str(self.images), str(path), disk_format="qcow2").id

    def base(self, image_id: str) -> pathlib.Path:
        return pathlib.Path(self.cache.path_for(image_id))

    def instance_dir(self, uuid: str) -> pathlib.Path:
        return pathlib.Path(self.conf.instances_path) / uuid


def age(path: os.PathLike[str] | str, seconds: float) -> None:
    """Set ``path``'s mtime ``seconds`` into the past."""
    when = os.stat(path).st_mtime - seconds
    os.utime(path, (when, when))


def backing_chain(disk: str) -> list[dict[str, Any]]:
    import json

    out = subprocess.run(["qemu-img", "info", "--output=json", "--backing-chain", "-U",
                          "-f", "qcow2", disk], check=True, capture_output=True, text=True)
    chain: list[dict[str, Any]] = json.loads(out.stdout)
    return chain


class _FullDisk:
    """A download's file sink on a full disk."""

    direct = False

    def write(self, data: object, /) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def finish(self) -> None:
        pass


def disk_is_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every download's file refuses its bytes from now on (``ENOSPC``): what the image
    cache's pipeline writes through (``download.file_sink``) is a full disk."""
    monkeypatch.setattr(download, "file_sink", lambda f: _FullDisk())
