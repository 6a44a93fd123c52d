"""Unit tests of the rbd disk backend's path through InstanceDisks (clone of Glance's
snapshot, import of the cached base, delete), with Ceph replaced by a recording fake; the real
bindings run in tests/integration/test_rbd_disks.py."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import uuid
from typing import Any

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.disk_record import DiskRecord, read_record, write_record
from fleetcache.compute.imagebackend.rbd_disks import RbdDisks, disk_name
from fleetcache.compute.instance_disks import InstanceDisks
from fleetcache.image.local import LocalImageSource
from fleetcache.image.rbd_location import RbdLocation
from fleetcache.image.source import ImageMeta
from tests.unit.compute.diskfixtures import CTXT, Host

FSID = "7d3c1f0e-2a4b-4c5d-8e9f-0a1b2c3d4e5f"
OTHER = "11111111-2222-4333-8444-555555555555"


class StoredInCeph(LocalImageSource):
    """Local images whose Glance record says they are in pool images of cluster ``fsid``."""

    fsid = FSID

    def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        meta = super().show(ctxt, image_id)
        return dataclasses.replace(meta,
                                   direct_url=f"rbd://{self.fsid}/images/{image_id}/snap")


class FakeRbd(RbdDisks):
    def __init__(self, *args: Any, fail: BaseException | None = None,
                 fail_import: BaseException | None = None) -> None:
        super().__init__(*args)
        self.calls: list[tuple[Any, ...]] = []
        self.disks: set[str] = set()
        self.fail = fail
        self.fail_import = fail_import
        #: (first 4 bytes, size) of each file imported, read when it was imported.
        self.imported: list[tuple[bytes, int]] = []

    def clone(self, parent: RbdLocation, instance_uuid: str, size: int | None) -> int:
        self.calls.append(("clone", parent.url, instance_uuid, size))
        if self.fail:
            raise self.fail
        self.disks.add(disk_name(instance_uuid))
        return size or 0

    def import_base(self, base: str, instance_uuid: str, size: int | None) -> int:
        self.calls.append(("import", base, instance_uuid, size))
        with open(base, "rb") as f:
            self.imported.append((f.read(4), os.path.getsize(base)))
        if self.fail_import:
            raise self.fail_import
        self.disks.add(disk_name(instance_uuid))
        return size or os.path.getsize(base)

    def exists(self, instance_uuid: str) -> bool:
        self.calls.append(("exists", instance_uuid))
        return disk_name(instance_uuid) in self.disks

    def remove(self, instance_uuid: str) -> bool:
        self.calls.append(("remove", instance_uuid))
        found = disk_name(instance_uuid) in self.disks
        self.disks.discard(disk_name(instance_uuid))
        return found


def _host(tmp_path: pathlib.Path, fsid: str = FSID, fail: BaseException | None = None,
          fail_import: BaseException | None = None, **overrides: Any) -> tuple[Host, FakeRbd]:
    ceph_conf = tmp_path / "ceph.conf"
    ceph_conf.write_text(f"[global]\n\tfsid = {FSID}\n")
    host = Host(tmp_path, libvirt__images_type_mapping=["raw:rbd", "qcow2:rbd"],
                libvirt__images_rbd_pool="instances", libvirt__rbd_user="instances",
                libvirt__images_rbd_ceph_conf=str(ceph_conf), **overrides)
    source = StoredInCeph(host.conf)
    source.fsid = fsid
    host.cache.source = source
    fake = FakeRbd(host.conf, fail=fail, fail_import=fail_import)
    host.disks = InstanceDisks(host.conf, host.cache, fake)
    return host, fake


def test_raw_image_in_this_cluster_is_cloned_without_a_download(tmp_path):
    host, rbd = _host(tmp_path)
    image, instance = host.add_raw(), str(uuid.uuid4())
    result = host.disks.create(CTXT, instance, image, 8 * 1024 * 1024)
    parent = f"rbd://{FSID}/images/{image}/snap"
    assert result == {"instance_uuid": instance, "image_id": image, "backend": "rbd",
                      "path": f"rbd:instances/{instance}_disk", "format": "raw",
                      "base": parent, "image_fetched": False}
    assert rbd.calls == [("clone", parent, instance, 8 * 1024 * 1024)]
    assert not host.base(image).exists()  # nothing downloaded
    assert read_record(str(host.instance_dir(instance))) == {
        "image_id": image, "backend": "rbd", "format": "raw", "base": parent,
        "base_format": "raw"}
    with pytest.raises(exception.Conflict):
        host.disks.create(CTXT, instance, image)

    assert host.disks.delete(instance) is True
    assert rbd.calls[-1] == ("remove", instance) and rbd.disks == set()
    assert not host.instance_dir(instance).exists()


@pytest.mark.parametrize("kind", ["qcow2", "raw of another cluster"])
def test_other_images_are_imported_from_a_raw_base(tmp_path, kind):
    host, rbd = _host(tmp_path, fsid=OTHER if kind.startswith("raw") else FSID)
    image = host.add_qcow2() if kind == "qcow2" else host.add_raw()
    instance = str(uuid.uuid4())
    result = host.disks.create(CTXT, instance, image)
    assert (result["backend"], result["path"], result["base"], result["image_fetched"]) == (
        "rbd", f"rbd:instances/{instance}_disk", str(host.base(image)), True)
    assert rbd.calls == [("import", str(host.base(image)), instance, None)]
    assert host.index.get(host.base(image).name)["base_format"] == "raw"  # type: ignore[index]


def _qcow2_base_then_rbd(host: Host, rbd: FakeRbd) -> str:
    """A qcow2 base cached while qcow2 images stayed qcow2, then qcow2 mapped to rbd."""
    host.conf.set_override("images_type_mapping", ["qcow2:qcow2"], group="libvirt")
    image = host.add_qcow2()
    host.disks.create(CTXT, str(uuid.uuid4()), image)
    assert host.index.get(host.base(image).name)["base_format"] == "qcow2"  # type: ignore[index]
    host.conf.set_override("images_type_mapping", ["raw:rbd", "qcow2:rbd"], group="libvirt")
    host.conf.set_override("force_raw_images", True)
    host.disks = InstanceDisks(host.conf, host.cache, rbd)
    return image


def test_a_qcow2_base_cached_before_qcow2_went_to_rbd_is_imported_as_raw(tmp_path):
    """Ceph stores raw bytes: the qcow2 base (kept, overlays may back onto it) is imported
    through a raw copy in the instance's directory, which is gone after the import."""
    host, rbd = _host(tmp_path, force_raw_images=False)
    image = _qcow2_base_then_rbd(host, rbd)
    instance = str(uuid.uuid4())
    result = host.disks.create(CTXT, instance, image)
    assert (result["backend"], result["path"]) == ("rbd", f"rbd:instances/{instance}_disk")
    staged = host.instance_dir(instance) / "base.raw.part"
    assert rbd.calls == [("import", str(staged), instance, None)]
    assert rbd.imported == [(bytes(4), 16 * 1024 * 1024)]  # raw zeros, not b"QFI\xfb"
    assert not staged.exists()
    assert host.index.get(host.base(image).name)["base_format"] == "qcow2"  # type: ignore[index]
    assert host.base(image).read_bytes()[:4] == b"QFI\xfb"


def test_a_failed_import_of_a_raw_copy_leaves_neither_copy_nor_record(tmp_path):
    host, rbd = _host(tmp_path, force_raw_images=False,
                      fail_import=exception.RbdError(action="import", reason="ENOSPC"))
    image = _qcow2_base_then_rbd(host, rbd)
    instance = str(uuid.uuid4())
    with pytest.raises(exception.RbdError, match="ENOSPC"):
        host.disks.create(CTXT, instance, image)
    assert not host.instance_dir(instance).exists()
    assert host.base(image).exists()


def test_failed_clone_leaves_no_record(tmp_path):
    host, rbd = _host(tmp_path, fail=exception.RbdError(action="clone", reason="EPERM"))
    image, instance = host.add_raw(), str(uuid.uuid4())
    with pytest.raises(exception.RbdError, match="rbd clone failed: EPERM"):
        host.disks.create(CTXT, instance, image)
    assert not host.instance_dir(instance).exists()
    assert host.disks.delete(instance) is False and rbd.calls[-1][0] == "clone"


def test_delete_of_a_file_disk_does_not_touch_ceph(tmp_path):
    host, rbd = _host(tmp_path, libvirt__images_type="flat")
    host.disks = InstanceDisks(host.conf, host.cache, rbd)
    host.conf.set_override("images_type_mapping", [], group="libvirt")
    image, instance = host.add_raw(), str(uuid.uuid4())
    assert host.disks.create(CTXT, instance, image)["backend"] == "flat"
    assert host.disks.delete(instance) is True
    assert rbd.calls == []


@pytest.mark.parametrize("damage", ["unreadable", "missing"])
def test_delete_removes_the_ceph_disk_of_an_instance_whose_record_is_lost(tmp_path, damage):
    host, rbd = _host(tmp_path)
    image, instance = host.add_raw(), str(uuid.uuid4())
    host.disks.create(CTXT, instance, image)
    record = host.instance_dir(instance) / "disk.json"
    if damage == "unreadable":
        record.write_text("{")
    else:
        record.unlink()
    assert host.disks.delete(instance) is True
    assert rbd.calls[-1] == ("remove", instance) and rbd.disks == set()
    assert not host.instance_dir(instance).exists()


def test_delete_with_a_lost_record_leaves_ceph_alone_on_a_host_without_rbd(tmp_path):
    host, rbd = _host(tmp_path, libvirt__images_type="flat")
    host.conf.set_override("images_type_mapping", [], group="libvirt")
    host.disks = InstanceDisks(host.conf, host.cache, rbd)
    image, instance = host.add_raw(), str(uuid.uuid4())
    host.disks.create(CTXT, instance, image)
    (host.instance_dir(instance) / "disk").unlink()
    (host.instance_dir(instance) / "disk.json").write_text("{")
    assert host.disks.delete(instance) is True
    assert rbd.calls == []


def test_only_raw_images_are_cloneable(tmp_path):
    host, rbd = _host(tmp_path)
    meta = ImageMeta(id="i", direct_url=f"rbd://{FSID}/images/i/snap")
    assert rbd.cloneable(meta, "raw") == RbdLocation(FSID, "images", "i", "snap")
    assert rbd.cloneable(meta, "qcow2") is None
    assert rbd.cloneable(ImageMeta(id="i"), "raw") is None
    bad = ImageMeta(id="i", direct_url=f"rbd://{FSID}/images/-i/snap")
    assert rbd.cloneable(bad, "raw") is None


def _unmade(host: Host, instance: str, image: str) -> pathlib.Path:
    """The instance's directory as an import's create leaves it when its process dies
    between writing ``disk.json`` and creating the image in Ceph (the real crash of a file
    disk is in test_instance_disks.py)."""
    directory = host.instance_dir(instance)
    directory.mkdir(parents=True)
    write_record(str(directory), DiskRecord(image_id=image, backend="rbd", format="raw",
                                            base=str(host.base(image)), base_format="raw"))
    return directory


def test_a_record_whose_ceph_image_never_came_is_replaced_by_the_next_create(tmp_path):
    host, rbd = _host(tmp_path, fsid=OTHER)
    image, instance = host.add_raw(), str(uuid.uuid4())
    _unmade(host, instance, image)
    result = host.disks.create(CTXT, instance, image)
    assert result["path"] == f"rbd:instances/{instance}_disk"
    assert rbd.calls == [("exists", instance), ("import", str(host.base(image)), instance, None)]


def test_a_record_whose_ceph_image_exists_keeps_it(tmp_path):
    """An import writes under the disk's own name: an image there may be half written, or
    complete with only the reply lost. Either way it is a disk, removed only by a delete."""
    host, rbd = _host(tmp_path, fsid=OTHER)
    image, instance = host.add_raw(), str(uuid.uuid4())
    directory = _unmade(host, instance, image)
    rbd.disks.add(disk_name(instance))
    with pytest.raises(exception.Conflict, match="already has a disk"):
        host.disks.create(CTXT, instance, image)
    assert rbd.calls == [("exists", instance)] and rbd.disks == {disk_name(instance)}
    assert read_record(str(directory)) is not None
