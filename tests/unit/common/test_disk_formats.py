"""fleetcache.common.disk_formats: each set holds what its docstring says, checked against the
tools that decide it (oslo.utils' format inspector, qemu-img) and the options that offer it."""

from __future__ import annotations

import subprocess

from oslo_config import cfg
from oslo_utils.imageutils import format_inspector as fi

from fleetcache.common import config, disk_formats
from fleetcache.image import qemu


def test_subsets_are_disk_formats() -> None:
    formats = set(disk_formats.DISK_FORMATS)
    assert len(formats) == len(disk_formats.DISK_FORMATS)
    assert set(disk_formats.AMI_FORMATS) <= set(disk_formats.RAW_CONTENT_FORMATS) <= formats
    assert set(disk_formats.INSPECTABLE_FORMATS) <= formats


def test_inspectable_formats_are_the_ones_the_inspector_knows() -> None:
    """A format is inspectable exactly when oslo.utils has an inspector for its content."""
    for fmt in disk_formats.DISK_FORMATS:
        has_inspector = disk_formats.content_format(fmt) in fi.ALL_FORMATS
        assert (fmt in disk_formats.INSPECTABLE_FORMATS) == has_inspector, fmt


def test_qemu_img_has_a_driver_for_every_inspectable_format() -> None:
    out = subprocess.run(["qemu-img", "--help"], capture_output=True, text=True,
                         check=True).stdout
    supported = next(line for line in out.splitlines() if line.startswith("Supported formats:"))
    drivers = set(supported.split(":", 1)[1].split())
    for fmt in (*disk_formats.INSPECTABLE_FORMATS, "gpt"):
        assert qemu.driver_name(fmt) in drivers, fmt


def test_raw_content_is_read_as_raw() -> None:
    for fmt in disk_formats.DISK_FORMATS:
        raw = fmt in disk_formats.RAW_CONTENT_FORMATS
        assert (disk_formats.content_format(fmt) == "raw") == raw, fmt
        assert (qemu.driver_name(fmt) == "raw") == raw, fmt


def test_images_type_offers_every_backend_and_default() -> None:
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    opt = conf._get_opt_info("images_type", "libvirt")["opt"]  # noqa: SLF001
    assert tuple(opt.type.choices) == (*disk_formats.DISK_BACKENDS, "default")
