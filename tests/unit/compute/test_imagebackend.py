"""fleetcache.compute.imagebackend: the mapping parser (seed 001), the backend-choice table,
supported image types, and the qcow2 and raw/flat backends run for real with qemu-img."""

from __future__ import annotations

import json
import os
import pathlib
import time
import uuid

import pytest
from oslo_config import cfg

from fleetcache.common import config, disk_formats, exception
from fleetcache.compute import imagebackend
from fleetcache.compute.imagebackend import backends, mapping
from fleetcache.image import format_safety
from tests import hostile_images as corpus
from tests.unit.image import fixtures


@pytest.fixture
def conf(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> cfg.ConfigOpts:
    """The shared configuration, with the instances under the test's directory."""
    conf.set_override("instances_path", str(tmp_path / "instances"))
    return conf


# --- seed 001: images_type_mapping ------------------------------------------------------------


@pytest.mark.parametrize(
    ("images_type", "values", "expected"),
    [
        ("default", ["raw:lvm", "ploop:ploop"], {"raw": "lvm", "ploop": "ploop"}),
        ("lvm", ["qcow2:qcow2"], {"qcow2": "qcow2"}),
        ("qcow2", ["raw:raw", "ploop:ploop"], {"raw": "raw", "ploop": "ploop"}),
        ("default", ["raw:raw", "qcow2:qcow2"], {"raw": "raw", "qcow2": "qcow2"}),
        ("default", [], {}),
    ],
)
def test_seed_correct_examples(
    conf: cfg.ConfigOpts, images_type: str, values: list[str], expected: dict[str, str]
) -> None:
    conf.set_override("images_type", images_type, group="libvirt")
    conf.set_override("images_type_mapping", values, group="libvirt")
    assert mapping.parse_images_type_mapping(conf.libvirt.images_type_mapping) == expected


def test_seed_correct_example_read_from_a_config_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "compute.conf"
    path.write_text(
        "[libvirt]\nimages_type = default\nimages_type_mapping = raw:lvm, ploop:ploop\n"
    )
    c = cfg.ConfigOpts()
    config.register_all(c)
    c(["--config-file", str(path)])
    assert mapping.parse_images_type_mapping(c.libvirt.images_type_mapping) == {
        "raw": "lvm",
        "ploop": "ploop",
    }


@pytest.mark.parametrize(
    ("values", "rule", "detail"),
    [
        (["qcow2:raw", "qcow2:qcow2"], "ambiguous source", "ambiguous conversion rule for source"),
        (["raw:rbd", "raw:lvm"], "ambiguous source", "'raw:rbd' and 'raw:lvm'"),
        (["lvm:rbd", "rbd:rbd"], "lvm/rbd as a source", "cannot be specified as a source"),
        (["vhdz:raw"], "unknown source format", "unknown source format 'vhdz'"),
        (["flat:qcow2"], "lvm/rbd as a source", "flat is a disk backend"),
        (["raw:zfs"], "unknown backend", "unknown backend 'zfs'"),
        (["raw:default"], "unknown backend", "unknown backend 'default'"),
        (["raw"], "malformed entry", "'raw' is not of the form"),
        (["raw:lvm:x"], "malformed entry", "is not of the form"),
        ([":raw"], "malformed entry", "is not of the form"),
    ],
)
def test_incorrect_mappings_name_option_and_rule(values: list[str], rule: str, detail: str) -> None:
    with pytest.raises(exception.InvalidConfiguration) as caught:
        mapping.parse_images_type_mapping(values)
    message = str(caught.value)
    assert "[libvirt] images_type_mapping" in message
    assert f"(rule: {rule})" in message
    assert detail in message


def test_seed_invalid_source_reports_both_entries() -> None:
    with pytest.raises(exception.InvalidConfiguration) as caught:
        mapping.parse_images_type_mapping(["lvm:rbd", "rbd:rbd"])
    assert "'lvm:rbd'" in str(caught.value) and "'rbd:rbd'" in str(caught.value)


def test_repeated_identical_entry_and_spacing_are_accepted() -> None:
    assert mapping.parse_images_type_mapping([" QCOW2 : qcow2", "qcow2:qcow2", ""]) == {
        "qcow2": "qcow2"
    }


@pytest.mark.parametrize("disk_format", disk_formats.DISK_FORMATS)
@pytest.mark.parametrize("backend", disk_formats.DISK_BACKENDS)
def test_mapping_accepts_every_disk_format_and_backend(disk_format: str, backend: str) -> None:
    assert mapping.parse_images_type_mapping([f"{disk_format}:{backend}"]) == {
        disk_format: backend
    }


@pytest.mark.parametrize("name", ["lvm", "rbd", "flat", "default", "gpt", "luks", "qed"])
def test_mapping_refuses_sources_that_are_not_disk_formats(name: str) -> None:
    with pytest.raises(exception.InvalidConfiguration, match="as a source|unknown source"):
        mapping.parse_images_type_mapping([f"{name}:raw"])


def test_every_backend_name_has_a_backend_class() -> None:
    assert set(backends.BACKEND_CLASSES) == set(disk_formats.DISK_BACKENDS)


def test_only_inspectable_formats_are_reported_as_supported(conf: cfg.ConfigOpts) -> None:
    for images_type in disk_formats.IMAGES_TYPE_CHOICES:
        conf.set_override("images_type", images_type, group="libvirt")
        assert imagebackend.supported_image_types(conf) <= set(disk_formats.INSPECTABLE_FORMATS)


# --- backend choice: mapping x disk_format x force_raw_images ---------------------------------

# (images_type, mapping, disk_format, force_raw_images) -> (backend, base_format)
CHOICE_TABLE = [
    # no mapping, images_type=default -> qcow2 (use_cow_images): Nova's behaviour
    ("default", [], "raw", True, "qcow2", "raw"),
    ("default", [], "raw", False, "qcow2", "raw"),
    ("default", [], "qcow2", True, "qcow2", "raw"),
    ("default", [], "qcow2", False, "qcow2", "qcow2"),
    ("default", [], "vmdk", True, "qcow2", "raw"),
    ("default", [], "vmdk", False, "qcow2", "raw"),
    ("default", [], "iso", False, "qcow2", "raw"),
    ("default", [], "ami", True, "qcow2", "raw"),
    # qcow2:qcow2 keeps the supplied qcow2 even with force_raw_images (seed 001)
    ("default", ["qcow2:qcow2"], "qcow2", True, "qcow2", "qcow2"),
    ("default", ["qcow2:qcow2"], "qcow2", False, "qcow2", "qcow2"),
    ("default", ["qcow2:qcow2"], "raw", True, "qcow2", "raw"),
    ("raw", ["qcow2:qcow2"], "raw", True, "raw", "raw"),
    ("raw", ["qcow2:qcow2"], "vdi", False, "raw", "raw"),
    # a mapping to a backend that cannot hold the format still converts
    ("default", ["qcow2:raw"], "qcow2", False, "raw", "raw"),
    ("default", ["qcow2:flat"], "qcow2", True, "flat", "raw"),
    ("default", ["vmdk:qcow2"], "vmdk", False, "qcow2", "raw"),
    ("default", ["qcow2:lvm"], "qcow2", False, "lvm", "raw"),
    ("default", ["qcow2:ploop"], "qcow2", False, "ploop", "raw"),
    # raw:lvm, ploop:ploop (seed example 1)
    ("default", ["raw:lvm", "ploop:ploop"], "raw", True, "lvm", "raw"),
    ("default", ["raw:lvm", "ploop:ploop"], "ploop", True, "ploop", "ploop"),
    ("default", ["raw:lvm", "ploop:ploop"], "qcow2", False, "qcow2", "qcow2"),
    ("default", ["raw:lvm", "ploop:ploop"], "qcow2", True, "qcow2", "raw"),
    # images_type=lvm, qcow2:qcow2 (seed example 2)
    ("lvm", ["qcow2:qcow2"], "qcow2", True, "qcow2", "qcow2"),
    ("lvm", ["qcow2:qcow2"], "raw", True, "lvm", "raw"),
    ("lvm", ["qcow2:qcow2"], "vmdk", False, "lvm", "raw"),
    # unmapped formats on backends that need raw are converted whatever force_raw_images says
    ("flat", [], "qcow2", False, "flat", "raw"),
    ("raw", [], "qcow2", False, "raw", "raw"),
    ("rbd", [], "qcow2", True, "rbd", "raw"),
    ("rbd", [], "qcow2", False, "rbd", "raw"),
    ("ploop", [], "qcow2", False, "ploop", "raw"),
    ("ploop", [], "ploop", False, "ploop", "ploop"),
    ("ploop", [], "ploop", True, "ploop", "raw"),
    ("qcow2", [], "vhd", False, "qcow2", "raw"),
]


@pytest.mark.parametrize(
    ("images_type", "values", "disk_format", "force_raw", "backend", "base_format"),
    CHOICE_TABLE,
    ids=[f"{r[0]}-{','.join(r[1]) or 'nomap'}-{r[2]}-force{r[3]}" for r in CHOICE_TABLE],
)
def test_backend_choice_table(
    conf: cfg.ConfigOpts,
    images_type: str,
    values: list[str],
    disk_format: str,
    force_raw: bool,
    backend: str,
    base_format: str,
) -> None:
    conf.set_override("images_type", images_type, group="libvirt")
    conf.set_override("images_type_mapping", values, group="libvirt")
    conf.set_override("force_raw_images", force_raw)
    plan = imagebackend.choose(conf, disk_format)
    assert (plan.backend, plan.base_format) == (backend, base_format)
    assert plan.mapped == (disk_format in mapping.parse_images_type_mapping(values))
    assert plan.convert == (base_format != plan.source_format)


@pytest.mark.parametrize(("use_cow", "backend"), [(True, "qcow2"), (False, "flat")])
def test_default_images_type_follows_use_cow_images(
    conf: cfg.ConfigOpts, use_cow: bool, backend: str
) -> None:
    conf.set_override("use_cow_images", use_cow)
    assert imagebackend.choose(conf, "raw").backend == backend


def test_choice_refuses_an_invalid_mapping(conf: cfg.ConfigOpts) -> None:
    conf.set_override("images_type_mapping", ["qcow2:raw", "qcow2:qcow2"], group="libvirt")
    with pytest.raises(exception.InvalidConfiguration, match="images_type_mapping"):
        imagebackend.choose(conf, "qcow2")


# --- supported image types --------------------------------------------------------------------

ALL_BUT_PLOOP = {"aki", "ami", "ari", "iso", "qcow2", "raw", "vdi", "vhd", "vhdx", "vmdk"}


@pytest.mark.parametrize(
    ("images_type", "values", "overrides", "expected"),
    [
        ("default", [], {}, ALL_BUT_PLOOP),
        ("flat", [], {}, ALL_BUT_PLOOP),
        ("default", [], {"vmdk_allowed_types": []}, ALL_BUT_PLOOP - {"vmdk"}),
        (
            "default",
            [],
            {"image_type_exclude_list": ["qcow2", "iso"]},
            ALL_BUT_PLOOP - {"qcow2", "iso"},
        ),
        # formats whose backend cannot create disks yet are not reported
        ("default", ["raw:lvm", "ploop:ploop"], {}, ALL_BUT_PLOOP - {"raw"}),
        ("lvm", ["qcow2:qcow2"], {}, {"qcow2"}),
        # rbd holds raw only and converts every other format to a raw base first
        ("rbd", ["qcow2:qcow2", "raw:raw"], {}, ALL_BUT_PLOOP),
        ("rbd", [], {}, ALL_BUT_PLOOP),
        ("ploop", ["ploop:ploop"], {}, set()),
    ],
)
def test_supported_image_types(
    conf: cfg.ConfigOpts,
    images_type: str,
    values: list[str],
    overrides: dict[str, list[str]],
    expected: set[str],
) -> None:
    conf.set_override("images_type", images_type, group="libvirt")
    conf.set_override("images_type_mapping", values, group="libvirt")
    for name, value in overrides.items():
        conf.set_override(name, value, group="compute")
    assert imagebackend.supported_image_types(conf) == expected


@pytest.mark.parametrize(("images_type", "expected"), [
    ("flat", {"raw", "iso", "ami", "aki", "ari"}),
    ("raw", {"raw", "iso", "ami", "aki", "ari"}),
    ("qcow2", set()),  # every overlay is made by qemu-img
])
def test_without_qemu_img_only_raw_content_is_supported(
    conf: cfg.ConfigOpts, images_type: str, expected: set[str]
) -> None:
    conf.set_override("images_type", images_type, group="libvirt")

    def which(tool: str) -> str | None:
        return None if tool == "qemu-img" else f"/usr/bin/{tool}"

    assert imagebackend.supported_image_types(conf, which=which) == expected


# --- real disks -------------------------------------------------------------------------------


def _backing_chain(disk: str) -> list[dict[str, object]]:
    chain = json.loads(corpus.qemu_img("info", "--backing-chain", "--output=json", disk))
    assert isinstance(chain, list)
    return chain


def _cache(conf: cfg.ConfigOpts, tmp_path: pathlib.Path, image: pathlib.Path, disk_format: str):
    """The cache path in miniature: inspect, plan, prepare the base in ``_base``."""
    inspected = format_safety.inspect_image(str(image), disk_format, conf)
    plan = imagebackend.choose(conf, disk_format)
    assert plan.source_format == inspected.format
    base_dir = tmp_path / "instances" / "_base"
    base_dir.mkdir(parents=True, exist_ok=True)
    base = str(base_dir / "image-1")
    imagebackend.prepare_base(plan, str(image), base)
    return plan, base


@pytest.mark.parametrize(
    ("values", "force_raw", "base_format"),
    [([], True, "raw"), ([], False, "qcow2"), (["qcow2:qcow2"], True, "qcow2")],
)
def test_qcow2_overlay_references_the_cached_base(
    conf: cfg.ConfigOpts,
    tmp_path: pathlib.Path,
    values: list[str],
    force_raw: bool,
    base_format: str,
) -> None:
    conf.set_override("images_type_mapping", values, group="libvirt")
    conf.set_override("force_raw_images", force_raw)
    plan, base = _cache(conf, tmp_path, corpus.qcow2_with_data(tmp_path), "qcow2")
    assert plan.base_format == base_format
    instance = str(uuid.uuid4())
    disk = imagebackend.create_instance_disk(conf, plan, instance, base, size=8 << 20)
    assert (disk.backend, disk.format) == ("qcow2", "qcow2")
    assert disk.path == os.path.join(tmp_path, "instances", instance, "disk")
    chain = _backing_chain(disk.path)
    assert [(layer["filename"], layer["format"]) for layer in chain] == [
        (disk.path, "qcow2"),
        (base, base_format),
    ]
    assert chain[0]["backing-filename-format"] == base_format
    assert chain[0]["virtual-size"] == 8 << 20
    assert os.path.getsize(disk.path) < 1 << 20  # an overlay, not a copy
    converted = tmp_path / "check.raw"
    corpus.qemu_img("convert", "-f", "qcow2", "-O", "raw", disk.path, str(converted))
    assert converted.read_bytes()[:10] == b"FLEETCACHE"


@pytest.mark.parametrize("images_type", ["raw", "flat"])
@pytest.mark.parametrize("force_raw", [True, False])
def test_flat_disk_is_a_sparse_raw_copy(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path, images_type: str, force_raw: bool
) -> None:
    conf.set_override("images_type", images_type, group="libvirt")
    conf.set_override("force_raw_images", force_raw)
    plan, base = _cache(conf, tmp_path, corpus.qcow2_with_data(tmp_path), "qcow2")
    assert (plan.backend, plan.base_format, plan.convert) == (images_type, "raw", True)
    assert (
        json.loads(corpus.qemu_img("info", "--output=json", "-f", "raw", base))["format"] == "raw"
    )
    disk = imagebackend.create_instance_disk(conf, plan, str(uuid.uuid4()), base, size=16 << 20)
    assert (disk.backend, disk.format) == (images_type, "raw")
    assert os.path.getsize(disk.path) == 16 << 20
    assert os.stat(disk.path).st_blocks * 512 < 1 << 20  # sparse
    with open(disk.path, "rb") as f:
        assert f.read(10) == b"FLEETCACHE"
    assert "backing-filename" not in json.loads(
        corpus.qemu_img("info", "--output=json", "-f", "raw", disk.path)
    )


def test_a_failed_flat_copy_is_a_disk_create_error_naming_the_disk(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path
) -> None:
    base = corpus.raw(tmp_path)
    disk = tmp_path / "gone" / "disk"  # cp cannot create it: its directory does not exist
    backend = imagebackend.get_backend("flat", conf)
    with pytest.raises(exception.DiskCreateFailed, match=f"Could not make disk {disk}: cp of "
                       f"{base} failed: .*No such file or directory") as caught:
        backend.create_disk(str(base), "raw", str(disk), None)
    assert caught.value.error_code == "fleetcache.disk.create_failed"


def test_unconverted_raw_base_is_renamed(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> None:
    image = corpus.raw(tmp_path)
    plan, base = _cache(conf, tmp_path, image, "raw")
    assert not plan.convert and not image.exists() and os.path.exists(base)


def test_disk_smaller_than_image_is_refused(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> None:
    plan, base = _cache(conf, tmp_path, corpus.qcow2_with_data(tmp_path), "qcow2")
    instance = str(uuid.uuid4())
    with pytest.raises(exception.InvalidInput, match="smaller than the image's virtual size"):
        imagebackend.create_instance_disk(conf, plan, instance, base, size=1 << 20)
    assert os.listdir(imagebackend.instance_dir(conf, instance)) == []  # no partial disk


def test_second_disk_for_an_instance_is_a_conflict(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path
) -> None:
    plan, base = _cache(conf, tmp_path, corpus.raw(tmp_path), "raw")
    instance = str(uuid.uuid4())
    imagebackend.create_instance_disk(conf, plan, instance, base)
    with pytest.raises(exception.Conflict):
        imagebackend.create_instance_disk(conf, plan, instance, base)
    assert imagebackend.delete_instance_disk(conf, instance) is True
    assert imagebackend.delete_instance_disk(conf, instance) is False
    assert os.path.exists(base)


@pytest.mark.parametrize("bad", ["../../etc", "not-a-uuid", ""])
def test_instance_uuid_must_be_a_uuid(conf: cfg.ConfigOpts, bad: str) -> None:
    with pytest.raises(exception.InvalidInput):
        imagebackend.instance_dir(conf, bad)


@pytest.mark.parametrize("images_type", ["lvm", "ploop"])
def test_declared_backends_do_not_create_disks_yet(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path, images_type: str
) -> None:
    conf.set_override("images_type", images_type, group="libvirt")
    plan = imagebackend.choose(conf, "raw")
    base = corpus.raw(tmp_path)
    with pytest.raises(NotImplementedError, match=f"{images_type} disk backend"):
        imagebackend.create_instance_disk(conf, plan, str(uuid.uuid4()), str(base))


@pytest.mark.parametrize(
    ("disk_format", "qemu_format"),
    [("vdi", "vdi"), ("vhd", "vpc"), ("vhdx", "vhdx"), ("vmdk", "vmdk"), ("iso", "raw")],
)
def test_every_reported_type_reaches_a_disk(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path, disk_format: str, qemu_format: str
) -> None:
    """The types supported_image_types reports really pass inspection, conversion and disk
    creation (iso: a hybrid ISO; the others converted from a raw payload by qemu-img)."""
    assert disk_format in imagebackend.supported_image_types(conf)
    if disk_format == "iso":
        image = corpus.gpt_iso_polyglot(tmp_path, valid_mbr=True)
        expected = image.read_bytes()[:512]
    else:
        payload = corpus.qcow2_with_data(tmp_path)
        image = tmp_path / f"image.{disk_format}"
        corpus.qemu_img("convert", "-f", "qcow2", "-O", qemu_format, str(payload), str(image))
        expected = b"FLEETCACHE"
    plan, base = _cache(conf, tmp_path, image, disk_format)
    assert (plan.backend, plan.base_format) == ("qcow2", "raw")
    disk = imagebackend.create_instance_disk(conf, plan, str(uuid.uuid4()), base)
    assert [layer["format"] for layer in _backing_chain(disk.path)] == ["qcow2", "raw"]
    converted = tmp_path / "check.raw"
    corpus.qemu_img("convert", "-f", "qcow2", "-O", "raw", disk.path, str(converted))
    assert converted.read_bytes()[: len(expected)] == expected


def test_failed_conversion_leaves_no_base(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> None:
    plan = imagebackend.choose(conf, "vmdk")
    downloaded = tmp_path / ".abc.part-1"
    downloaded.write_bytes(b"KDMV" + b"\x00" * 1020)  # not a VMDK qemu-img can read
    base = tmp_path / "abc"
    with pytest.raises(exception.QemuImgError, match="qemu-img convert failed"):
        imagebackend.prepare_base(plan, str(downloaded), str(base))
    assert os.listdir(tmp_path) == []  # no base, no staged conversion, download consumed


def test_overlay_creation_over_its_time_limit_is_killed_and_leaves_no_disk(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf.set_override("images_create_timeout", 1, group="libvirt")
    plan, base = _cache(conf, tmp_path, corpus.qcow2_with_data(tmp_path), "qcow2")
    assert plan.backend == "qcow2"
    fixtures.hanging_qemu_img(tmp_path, monkeypatch, "create")
    instance = str(uuid.uuid4())
    began = time.monotonic()
    with pytest.raises(exception.QemuImgError,
                       match=r"qemu-img create failed: .* 1 s \(\[libvirt\] "
                             r"images_create_timeout\)"):
        imagebackend.create_instance_disk(conf, plan, instance, base)
    assert time.monotonic() - began < 5
    assert os.listdir(imagebackend.instance_dir(conf, instance)) == []  # no disk, no .part
