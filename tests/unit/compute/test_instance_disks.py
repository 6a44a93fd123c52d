"""Unit tests of instance disk creation and deletion (fleetcache.compute.instance_disks)."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import uuid

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.disk_record import read_record
from fleetcache.compute.imagecache import CacheOutcome, cache_name
from fleetcache.compute.instance_disks import validate_uuid
from tests.unit.compute.diskfixtures import CTXT, Host, MiB, backing_chain

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("value", [
    "../../etc", "", "x" * 36, "{12345678-1234-1234-1234-123456789abc}",
    "urn:uuid:12345678-1234-1234-1234-123456789abc", "12345678123412341234123456789abc",
    "12345678-1234-1234-1234-123456789abc/../x", "12345678-1234-1234-1234-123456789abc\n",
    None, 42,
])
def test_validate_uuid_refuses_anything_but_a_canonical_uuid(value: object) -> None:
    with pytest.raises(exception.InvalidInput, match="is not a UUID"):
        validate_uuid(value)


def test_validate_uuid_lowercases() -> None:
    assert validate_uuid("12345678-1234-ABCD-1234-123456789ABC") == (
        "12345678-1234-abcd-1234-123456789abc")


def test_flat_disk_from_an_uncached_raw_image(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path, libvirt__images_type="flat")
    image = host.add_raw(2 * MiB)
    instance = str(uuid.uuid4())
    result = host.disks.create(CTXT, instance, image, 4 * MiB)
    disk = host.instance_dir(instance) / "disk"
    assert result == {"instance_uuid": instance, "image_id": image, "backend": "flat",
                      "path": str(disk), "format": "raw", "base": str(host.base(image)),
                      "image_fetched": True}
    assert disk.stat().st_size == 4 * MiB
    assert disk.read_bytes()[:2 * MiB] == host.base(image).read_bytes()
    assert read_record(str(host.instance_dir(instance))) == {
        "image_id": image, "backend": "flat", "format": "raw", "base": str(host.base(image)),
        "base_format": "raw"}
    assert host.index.get(cache_name(image)) == {
        "image_id": image, "disk_format": "raw", "base_format": "raw"}


def test_qcow2_overlay_on_a_cached_base(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)  # images_type default + use_cow_images: qcow2
    image = host.add_raw()
    host.cache.fetch(CTXT, image)
    instance = str(uuid.uuid4())
    result = host.disks.create(CTXT, instance, image)
    assert (result["backend"], result["format"], result["image_fetched"]) == (
        "qcow2", "qcow2", False)
    chain = backing_chain(result["path"])
    assert chain[0]["backing-filename"] == str(host.base(image))
    assert chain[0]["backing-filename-format"] == "raw"
    assert chain[1]["filename"] == str(host.base(image))


def test_qcow2_image_kept_as_qcow2_is_checked_and_backs_the_overlay(
        tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path, force_raw_images=False)
    image = host.add_qcow2()
    result = host.disks.create(CTXT, str(uuid.uuid4()), image)
    assert host.index.get(cache_name(image))["base_format"] == "qcow2"  # type: ignore[index]
    assert backing_chain(result["path"])[0]["backing-filename-format"] == "qcow2"


def test_a_base_that_is_not_what_its_record_says_is_refused(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path, force_raw_images=False)
    image = host.add_qcow2()
    host.cache.fetch(CTXT, image)
    assert host.index.get(cache_name(image))["base_format"] == "qcow2"  # type: ignore[index]
    host.base(image).write_bytes(os.urandom(MiB))  # the base changed on disk since
    instance = str(uuid.uuid4())
    with pytest.raises(exception.ImageFormatRejected):
        host.disks.create(CTXT, instance, image)
    assert not host.instance_dir(instance).exists()


def test_second_create_conflicts_and_delete_removes_the_directory(
        tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = host.add_raw()
    instance = str(uuid.uuid4())
    host.disks.create(CTXT, instance, image)
    with pytest.raises(exception.Conflict, match="already has a disk"):
        host.disks.create(CTXT, instance, image)
    assert host.disks.delete(instance.upper()) is True
    assert not host.instance_dir(instance).exists()
    assert host.disks.delete(instance) is False
    assert host.base(image).exists()  # the cache is the ageing pass's business


def test_failed_create_leaves_no_instance_directory(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = host.add_raw(2 * MiB)
    instance = str(uuid.uuid4())
    with pytest.raises(exception.InvalidInput, match="smaller than the image's virtual size"):
        host.disks.create(CTXT, instance, image, MiB)
    assert not host.instance_dir(instance).exists()


@pytest.mark.parametrize("size", [0, -1, 1.5, True, "10"])
def test_bad_size_is_refused(tmp_path: pathlib.Path, size: object) -> None:
    host = Host(tmp_path)
    with pytest.raises(exception.InvalidInput, match="not a positive integer"):
        host.disks.create(CTXT, str(uuid.uuid4()), host.add_raw(), size)  # type: ignore[arg-type]


def test_unknown_image_and_image_without_format(tmp_path: pathlib.Path) -> None:
    """An image without disk format is refused by the cache's rule, as a fetch would be."""
    host = Host(tmp_path)
    with pytest.raises(exception.ImageNotFound):
        host.disks.create(CTXT, str(uuid.uuid4()), "no-such-image")
    image = host.add_raw()
    meta_path = host.images / f"{image}.json"
    meta = json.loads(meta_path.read_text())
    meta["disk_format"] = None
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(exception.ImageNotAvailable, match="no disk_format"):
        host.disks.create(CTXT, str(uuid.uuid4()), image)
    assert not host.base(image).exists()


def test_base_removed_between_fetch_and_lock_is_fetched_again(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = host.add_raw()
    fetch = host.cache.fetch
    calls = []

    def fetch_then_age_out(ctxt: RequestContext, image_id: str) -> CacheOutcome:
        outcome = fetch(ctxt, image_id)
        calls.append(outcome)
        if len(calls) == 1:  # the ageing pass wins the lock first, once
            os.unlink(host.cache.path_for(image_id))
        return outcome

    host.cache.fetch = fetch_then_age_out  # type: ignore[method-assign]
    result = host.disks.create(CTXT, str(uuid.uuid4()), image)
    assert [c.downloaded for c in calls] == [True, True]
    assert result["image_fetched"] is True
    assert os.path.exists(result["path"])


def test_create_touches_the_base(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = host.add_raw()
    host.cache.fetch(CTXT, image)
    os.utime(host.base(image), (1_000_000, 1_000_000))
    host.disks.cache.fetch = lambda *a, **k: CacheOutcome(downloaded=False)  # type: ignore[method-assign]
    host.disks.create(CTXT, str(uuid.uuid4()), image)
    assert host.base(image).stat().st_mtime > 1_000_000


def test_an_unimplemented_backend_is_refused_before_any_download(
        tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path, libvirt__images_type_mapping=["raw:ploop"])
    image = host.add_raw()
    with pytest.raises(exception.InstanceDisksNotSupported, match="ploop disk backend"):
        host.disks.create(CTXT, str(uuid.uuid4()), image)
    assert not host.base(image).exists()


# --- a create whose process died part way ------------------------------------------------------

#: A create of argv's instance and image on the Host in argv's directory, in a process of its
#: own that is SIGKILLed (no ``finally``, no clean-up) at argv's point: just before the disk is
#: made (``disk.json`` is written), while ``disk.part`` is being written, or once ``disk`` is.
_CRASHING_CREATE = """
import os, pathlib, signal, sys
from fleetcache.compute import imagebackend
from tests.unit.compute.diskfixtures import CTXT, Host
directory, instance, image, point = sys.argv[1:]
make = imagebackend.create_instance_disk
def crash(conf, plan, uuid, base, size=None):
    if point == "after the disk":
        make(conf, plan, uuid, base, size)
    elif point == "while writing the disk":
        part = os.path.join(imagebackend.instance_dir(conf, uuid), "disk.part")
        pathlib.Path(part).write_bytes(b"half a disk")
    os.kill(os.getpid(), signal.SIGKILL)
imagebackend.create_instance_disk = crash
Host(pathlib.Path(directory)).disks.create(CTXT, instance, image)
"""


def _killed_create(host: Host, instance: str, image: str, point: str) -> pathlib.Path:
    """Run :data:`_CRASHING_CREATE`; :returns: the instance's directory it left."""
    done = subprocess.run(
        [sys.executable, "-c", _CRASHING_CREATE, str(host.tmp_path), instance, image, point],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    return host.instance_dir(instance)


@pytest.mark.parametrize("point", ["before the disk", "while writing the disk"])
def test_the_next_create_recovers_from_a_create_killed_before_its_disk_existed(
        tmp_path: pathlib.Path, point: str) -> None:
    host = Host(tmp_path)
    image = host.add_raw()
    instance = str(uuid.uuid4())
    directory = _killed_create(host, instance, image, point)
    assert (directory / "disk.json").exists() and not (directory / "disk").exists()

    result = host.disks.create(CTXT, instance, image)
    assert result["path"] == str(directory / "disk") and (directory / "disk").is_file()
    assert read_record(str(directory)) == {
        "image_id": image, "backend": "qcow2", "format": "qcow2",
        "base": str(host.base(image)), "base_format": "raw"}
    assert sorted(p.name for p in directory.iterdir()) == ["disk", "disk.json"]


def test_a_create_killed_once_its_disk_existed_keeps_the_disk(tmp_path: pathlib.Path) -> None:
    host = Host(tmp_path)
    image = host.add_raw()
    instance = str(uuid.uuid4())
    directory = _killed_create(host, instance, image, "after the disk")
    disk, record = (directory / "disk").read_bytes(), (directory / "disk.json").read_bytes()

    with pytest.raises(exception.Conflict, match="already has a disk"):
        host.disks.create(CTXT, instance, image)
    assert (directory / "disk").read_bytes() == disk
    assert (directory / "disk.json").read_bytes() == record


def test_a_record_that_cannot_be_read_is_kept(tmp_path: pathlib.Path) -> None:
    """Its backend is unknown: the disk may be in Ceph, so the record is no proof that the
    disk never came into being."""
    host = Host(tmp_path)
    image = host.add_raw()
    instance = str(uuid.uuid4())
    directory = host.instance_dir(instance)
    directory.mkdir(parents=True)
    (directory / "disk.json").write_text("{not json")
    with pytest.raises(exception.Conflict, match="already has a disk"):
        host.disks.create(CTXT, instance, image)
    assert (directory / "disk.json").read_text() == "{not json"
