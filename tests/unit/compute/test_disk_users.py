"""Unit tests of the scan for base images in use (fleetcache.compute.disk_users)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import uuid

from fleetcache.compute import disk_users
from fleetcache.compute.imagecache import cache_name
from tests.unit.compute.diskfixtures import CTXT, Host


def _scan(host: Host) -> disk_users.DiskUsers:
    return disk_users.scan(host.conf, host.cache.base_dir)


def test_qcow2_overlays_use_their_base_and_copies_do_not(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    overlaid, copied = host.add_raw(), host.add_raw()
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    host.disks.create(CTXT, a, overlaid)
    host.conf.set_override("images_type", "flat", group="libvirt")
    host.disks.create(CTXT, b, copied)
    users = _scan(host)
    assert users.bases == {cache_name(overlaid): {a}}
    assert users.unknown == []


def test_the_disk_not_the_record_says_which_base(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    first, second = host.add_raw(), host.add_raw()
    instance = str(uuid.uuid4())
    result = host.disks.create(CTXT, instance, first)
    host.cache.fetch(CTXT, second)
    subprocess.run(["qemu-img", "rebase", "-u", "-f", "qcow2", "-F", "raw", "-b",
                    str(host.base(second)), result["path"]], check=True)
    assert _scan(host).bases == {cache_name(second): {instance}}


def test_unreadable_recorded_qcow2_keeps_its_recorded_base(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = host.add_raw()
    instance = str(uuid.uuid4())
    result = host.disks.create(CTXT, instance, image)
    pathlib.Path(result["path"]).write_bytes(b"QFI\xfb garbage")
    assert _scan(host).bases == {cache_name(image): {instance}}


def _unrecorded_disk(host: Host, content: bytes | None = None,
                     backing: pathlib.Path | None = None) -> str:
    instance = str(uuid.uuid4())
    directory = host.instance_dir(instance)
    directory.mkdir(parents=True)
    disk = directory / "disk"
    if backing is not None:
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
                        str(backing), str(disk)], check=True)
    else:
        disk.write_bytes(content or b"")
    return instance


def test_disks_without_a_record(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = host.add_raw()
    host.cache.fetch(CTXT, image)
    overlay = _unrecorded_disk(host, backing=host.base(image))
    _unrecorded_disk(host, content=b"\0" * 4096)  # a raw disk: not qcow2, no base
    users = _scan(host)
    assert users.bases == {cache_name(image): {overlay}}
    assert users.unknown == []


def test_unreadable_qcow2_without_a_record_is_unknown(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    broken = _unrecorded_disk(host, content=b"QFI\xfb" + b"\xff" * 60)
    assert _scan(host).unknown == [str(host.instance_dir(broken))]


def test_a_raw_record_means_qemu_img_never_reads_the_disk(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = host.add_raw()
    host.cache.fetch(CTXT, image)
    instance = _unrecorded_disk(host, backing=host.base(image))  # a qcow2 header...
    (host.instance_dir(instance) / "disk.json").write_text(json.dumps({  # ...in a raw disk
        "image_id": image, "backend": "flat", "format": "raw", "base": str(host.base(image)),
        "base_format": "raw"}))
    assert _scan(host).bases == {}


def test_backing_files_outside_the_cache_are_ignored(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    elsewhere = tmp_path / "elsewhere.raw"
    elsewhere.write_bytes(b"\0" * 65536)
    _unrecorded_disk(host, backing=elsewhere)
    assert _scan(host).bases == {}
