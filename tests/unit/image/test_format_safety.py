"""fleetcache.image.format_safety: detection rules, qemu-img agreement, streaming use."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
from oslo_config import cfg
from oslo_utils import units

from fleetcache.common import exception
from fleetcache.image import format_safety, qemu
from tests import hostile_images as corpus


@pytest.fixture
def qemu_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[tuple[str, ...], Any]]]:
    """Every command fleetcache.image.qemu runs, with its prlimit (the real command still runs)."""
    calls: list[tuple[tuple[str, ...], Any]] = []
    real = qemu.execute

    def spy(*cmd: str, **kwargs: Any) -> Any:
        calls.append((cmd, kwargs.get("prlimit")))
        return real(*cmd, **kwargs)

    monkeypatch.setattr(qemu, "execute", spy)
    yield calls


def test_qemu_img_is_installed() -> None:
    assert corpus.QEMU_IMG, "qemu-img missing: run tools/install-debian-deps.sh"


@pytest.mark.parametrize("disk_format", ["ploop", "luks", "gpt", "qed", "bogus"])
def test_uninspectable_disk_format_refused_before_reading(
    conf: cfg.ConfigOpts, disk_format: str
) -> None:
    with pytest.raises(exception.ImageFormatRejected, match="cannot be inspected safely"):
        format_safety.inspect_image("/nonexistent/never-opened", disk_format, conf)
    with pytest.raises(exception.ImageFormatRejected, match="cannot be inspected safely"):
        format_safety.StreamInspection("img", disk_format)


def test_good_qcow2_runs_qemu_img_with_format_and_limits(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path, qemu_calls: list[Any]
) -> None:
    path = corpus.qcow2(tmp_path, size="8M")
    got = format_safety.inspect_image(str(path), "qcow2", conf, image_id="img")
    assert (got.format, got.detected, got.virtual_size) == ("qcow2", "qcow2", 8 * units.Mi)
    commands = [cmd for cmd, _ in qemu_calls]
    assert commands == [
        ("qemu-img", "info", "--output=json", "-f", "qcow2", str(path)),
        ("qemu-img", "check", "--output=json", "-f", "qcow2", str(path)),
    ]
    for _, limits in qemu_calls:
        assert limits.cpu_time == 30
        assert limits.address_space == 2 * units.Gi


def test_limits_come_from_config(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path, qemu_calls: list[Any]
) -> None:
    conf.set_override("images_cpu_time_limit", 7, group="libvirt")
    conf.set_override("images_address_space_limit", 3, group="libvirt")
    format_safety.inspect_image(str(corpus.qcow2(tmp_path)), "qcow2", conf)
    for _, limits in qemu_calls:
        assert (limits.cpu_time, limits.address_space) == (7, 3 * units.Gi)
    assert len(qemu_calls) == 2


@pytest.mark.parametrize("disk_format", ["raw", "ami"])
def test_raw_content_needs_no_qemu_img(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path, qemu_calls: list[Any],
    monkeypatch: pytest.MonkeyPatch, disk_format: str,
) -> None:
    """No header, so no backing or data file: the inspector's verdict is the whole check."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    path = corpus.raw(tmp_path)
    got = format_safety.inspect_image(str(path), disk_format, conf)
    assert (got.format, got.detected) == ("raw", "raw")
    assert got.virtual_size == path.stat().st_size
    assert got.actual_size == path.stat().st_blocks * 512
    assert qemu_calls == []


def test_without_qemu_img_an_image_with_a_header_is_refused_saying_why(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path, qemu_calls: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = corpus.qcow2(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(exception.ImageFormatRejected) as caught:
        format_safety.inspect_image(str(path), "qcow2", conf, image_id="i1")
    assert str(caught.value) == (
        "Image i1 was refused by format inspection: a qcow2 image is checked with qemu-img, "
        "which is not installed on this host (Debian package qemu-utils)")
    assert qemu_calls == []


def test_raw_declared_with_gpt_content_is_raw(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "partitioned.raw"
    path.write_bytes(corpus._mbr(valid=True) + b"\x00" * (1 << 20))
    got = format_safety.inspect_image(str(path), "raw", conf)
    assert (got.detected, got.format, got.disk_format) == ("gpt", "raw", "raw")


def test_bootable_iso_with_gpt_is_iso_read_as_raw(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path
) -> None:
    got = format_safety.inspect_image(
        str(corpus.gpt_iso_polyglot(tmp_path, valid_mbr=True)), "iso", conf
    )
    assert (got.detected, got.format) == ("iso", "raw")


@pytest.mark.parametrize("disk_format", ["ami", "aki", "ari"])
def test_ami_formats_must_be_plain_raw(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path, disk_format: str
) -> None:
    assert format_safety.inspect_image(str(corpus.raw(tmp_path)), disk_format, conf).format == "raw"
    with pytest.raises(exception.ImageFormatRejected, match=f"content is qcow2 .* {disk_format}"):
        format_safety.inspect_image(str(corpus.qcow2(tmp_path)), disk_format, conf)


@pytest.mark.parametrize("subformat", ["monolithicSparse", "streamOptimized"])
def test_vmdk_allowed_types(conf: cfg.ConfigOpts, tmp_path: pathlib.Path, subformat: str) -> None:
    path = str(corpus.vmdk(tmp_path, subformat))
    assert format_safety.inspect_image(path, "vmdk", conf).vmdk_create_type == subformat.lower()
    other = "streamOptimized" if subformat == "monolithicSparse" else "monolithicSparse"
    conf.set_override("vmdk_allowed_types", [other], group="compute")
    with pytest.raises(exception.ImageFormatRejected, match=f"create-type {subformat.lower()} "):
        format_safety.inspect_image(path, "vmdk", conf)
    conf.set_override("vmdk_allowed_types", [], group="compute")
    with pytest.raises(exception.ImageFormatRejected, match="vmdk_allowed_types is empty"):
        format_safety.inspect_image(path, "vmdk", conf)


@pytest.mark.parametrize(
    ("info", "reason"),
    [
        ({"format": "raw"}, "qemu-img reads it as raw but the inspector found qcow2"),
        (
            {"format": "qcow2", "backing-filename": "/etc/passwd"},
            "qemu-img reports a backing file: /etc/passwd",
        ),
        (
            {"format": "qcow2", "format-specific": {"data": {"data-file": "/etc/shadow"}}},
            "qemu-img reports a data-file: /etc/shadow",
        ),
    ],
)
def test_qemu_img_must_agree_with_the_inspector(
    conf: cfg.ConfigOpts,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    info: dict[str, Any],
    reason: str,
) -> None:
    """Defence in depth: a qemu-img that sees what the inspector missed still refuses."""
    monkeypatch.setattr(qemu, "info", lambda *a, **k: info)
    with pytest.raises(exception.ImageFormatRejected) as caught:
        format_safety.inspect_image(str(corpus.qcow2(tmp_path)), "qcow2", conf, image_id="i1")
    assert str(caught.value) == f"Image i1 was refused by format inspection: {reason}"


def test_qemu_vmdk_create_type_is_checked_too(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = {"format": "vmdk", "format-specific": {"data": {"create-type": "monolithicFlat"}}}
    monkeypatch.setattr(qemu, "info", lambda *a, **k: info)
    with pytest.raises(exception.ImageFormatRejected, match="create-type monolithicFlat is not"):
        format_safety.inspect_image(str(corpus.vmdk(tmp_path)), "vmdk", conf)


def test_qemu_img_failure_is_a_rejection(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> None:
    """A qcow2 header the inspector accepts but qemu-img cannot open (cluster_bits = 40)."""
    body = bytearray(corpus.qcow2(tmp_path).read_bytes())
    body[20:24] = (40).to_bytes(4, "big")
    path = tmp_path / "bad-cluster-bits.qcow2"
    path.write_bytes(bytes(body))
    with pytest.raises(exception.ImageFormatRejected, match="qemu-img info -f qcow2 refused it"):
        format_safety.inspect_image(str(path), "qcow2", conf)


def _chunks(path: pathlib.Path, size: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(size):
            yield chunk


def test_stream_inspection_gives_the_file_verdict(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path, qemu_calls: list[Any]
) -> None:
    path = corpus.qcow2_with_data(tmp_path)
    stream = format_safety.StreamInspection("img", "qcow2")
    for chunk in _chunks(path, 4096):
        stream.feed(chunk)
    assert stream.decided
    assert stream.bytes_seen < path.stat().st_size  # stopped looking once decided
    streamed = format_safety.inspect_image(str(path), "qcow2", conf, stream=stream)
    assert streamed == format_safety.inspect_image(str(path), "qcow2", conf)


def test_stream_inspection_aborts_on_the_first_chunk(tmp_path: pathlib.Path) -> None:
    stream = format_safety.StreamInspection("img", "qcow2")
    first = next(_chunks(corpus.raw(tmp_path), 64 * 1024))
    with pytest.raises(exception.ImageFormatRejected, match="does not match disk_format qcow2"):
        stream.feed(first)


def test_stream_feed_after_finish_is_a_bug(tmp_path: pathlib.Path) -> None:
    stream = format_safety.StreamInspection("img", "raw")
    stream.feed(b"\x00" * 512)
    stream.finish()
    with pytest.raises(RuntimeError):
        stream.feed(b"\x00")


def test_stream_polyglot_refused_at_finish(tmp_path: pathlib.Path) -> None:
    stream = format_safety.StreamInspection("img", "iso", abort_early=False)
    for chunk in _chunks(corpus.qcow2_iso_polyglot(tmp_path), 8192):
        stream.feed(chunk)
    with pytest.raises(exception.ImageFormatRejected, match=r"several formats .*iso, qcow2"):
        stream.finish()

