"""Unit tests of the disk virt driver (fleetcache.compute.virt.disk)."""

from __future__ import annotations

import io
import os
import pathlib
import shutil

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute import imagebackend
from fleetcache.compute.imagecache import cache_name
from fleetcache.compute.virt.disk import DiskDriver
from fleetcache.image.local import LocalImageSource, add_image
from tests.unit.image.fixtures import make_conf
from tests.unit.image.signing import Signer


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
    assert outcome.downloaded and outcome.bytes_downloaded == 4096
    cached = tmp_path / "instances" / "_base" / cache_name(meta.id)
    assert cached.read_bytes() == b"x" * 4096


def test_init_host_removes_partials_of_a_killed_predecessor(tmp_path: pathlib.Path) -> None:
    base = tmp_path / "instances" / "_base"
    base.mkdir(parents=True)
    (base / f".{cache_name('img')}.part-abc123").write_bytes(b"half")
    _driver(tmp_path, tmp_path / "instances").init_host("host1")
    assert os.listdir(base) == []


def test_init_host_refuses_an_invalid_configuration_first(tmp_path: pathlib.Path) -> None:
    driver = _driver(tmp_path, tmp_path / "instances")
    driver.conf.set_override("images_type_mapping", ["qcow2:raw", "qcow2:qcow2"], group="libvirt")
    with pytest.raises(exception.InvalidConfiguration,
                       match=r"\[libvirt\] images_type_mapping: .* \(rule: ambiguous source\)"):
        driver.init_host("host1")
    assert not (tmp_path / "instances").exists()


def test_init_host_refuses_a_backend_whose_tools_are_missing(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A PATH with the tools the other checks need but no LVM tools, whatever this host has.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("qemu-img", "cp", "prlimit"):
        found = shutil.which(tool)
        assert found is not None, f"{tool} is needed on this host"
        (bin_dir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bin_dir))
    driver = _driver(tmp_path, tmp_path / "instances")
    driver.conf.set_override("images_type", "lvm", group="libvirt")
    driver.conf.set_override("images_volume_group", "vg0", group="libvirt")
    with pytest.raises(exception.InvalidConfiguration,
                       match=r"\[libvirt\] images_type: backend lvm needs lvcreate, "
                             r"lvremove, lvs, vgs, not found"):
        driver.init_host("host1")


@pytest.mark.parametrize("overrides,supported", [
    ({}, {"raw", "qcow2", "iso", "ami", "aki", "ari", "vmdk", "vdi", "vhd", "vhdx"}),
    ({"compute__image_type_exclude_list": ["vhd", "vhdx"], "compute__vmdk_allowed_types": []},
     {"raw", "qcow2", "iso", "ami", "aki", "ari", "vdi"}),
    # rbd boots raw as it is and converts every other inspectable format to raw first
    ({"libvirt__images_type": "rbd"},
     {"raw", "qcow2", "iso", "ami", "aki", "ari", "vmdk", "vdi", "vhd", "vhdx"}),
])
def test_capabilities_derive_image_types_from_configuration(
        tmp_path: pathlib.Path, overrides: dict[str, object], supported: set[str]) -> None:
    conf = make_conf(instances_path=str(tmp_path), image_source__backend="local",
                     image_source__local_directory=str(tmp_path / "images"), **overrides)
    caps = DiskDriver(conf).get_capabilities()
    assert caps["has_imagecache"] is True
    assert {k.removeprefix("supports_image_type_") for k, v in caps.items()
            if k.startswith("supports_image_type_") and v} == supported
    assert "supports_image_type_ploop" in caps and not caps["supports_image_type_ploop"]
    assert imagebackend.supported_image_types(conf) == supported  # one function decides


@pytest.mark.parametrize("tamper", [False, True])
def test_cache_image_verifies_signatures_with_the_given_certificate_loader(
        tmp_path: pathlib.Path, tamper: bool) -> None:
    signer = Signer()
    data = os.urandom(200_000)
    stored = data[:-1] + bytes([data[-1] ^ 1]) if tamper else data
    meta = add_image(str(tmp_path / "images"), io.BytesIO(stored),
                     properties=signer.properties(data))
    conf = make_conf(instances_path=str(tmp_path / "instances"), image_source__backend="local",
                     image_source__local_directory=str(tmp_path / "images"),
                     glance__verify_glance_signatures=True)
    driver = DiskDriver(conf, load_certificate=signer.load_certificate)
    driver.init_host("host1")
    if tamper:
        with pytest.raises(exception.ImageSignatureVerificationFailed, match="does not match"):
            driver.cache_image(RequestContext(), meta.id)
        assert os.listdir(tmp_path / "instances" / "_base") == []
    else:
        assert driver.cache_image(RequestContext(), meta.id).downloaded
    assert signer.loaded == [signer.cert_uuid]
