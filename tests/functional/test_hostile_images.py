"""The hostile image corpus of issue 4: every image is refused, with a precise reason, and no
host file is read: the only file opened is the image itself, and qemu-img never runs on an
image the format inspector refused (so it never follows a backing file, data-file or extent).
"""

from __future__ import annotations

import builtins
import pathlib
from collections.abc import Callable
from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.image import format_safety, format_stream, qemu
from tests import hostile_images as corpus

Builder = Callable[[pathlib.Path], pathlib.Path]

# (builder, declared disk_format, exact reason, whether qemu-img may run on it)
CASES: list[tuple[str, Builder, str, str, bool]] = [
    (
        "qcow2 backed by /etc/passwd",
        corpus.qcow2_backing_passwd,
        "qcow2",
        "qcow2 image fails the safety check (backing_file: Image has a backing file)",
        False,
    ),
    (
        "qcow2 with a data-file",
        corpus.qcow2_data_file,
        "qcow2",
        "qcow2 image fails the safety check (data_file: Image has data_file set)",
        False,
    ),
    (
        "VMDK monolithicFlat descriptor naming /etc/passwd",
        corpus.vmdk_flat_passwd,
        "vmdk",
        "VMDK create-type monolithicflat is not in [compute] vmdk_allowed_types "
        "(streamOptimized, monolithicSparse)",
        False,
    ),
    (
        "raw declared qcow2",
        corpus.raw,
        "qcow2",
        "content is raw (no complete qcow2 header: not qcow2, or truncated) "
        "but Glance disk_format is qcow2",
        False,
    ),
    (
        "qcow2 declared raw",
        corpus.qcow2,
        "raw",
        "content is qcow2 but Glance disk_format is raw",
        False,
    ),
    (
        "qcow2 truncated inside its header",
        corpus.truncated_qcow2_header,
        "qcow2",
        "content is raw (no complete qcow2 header: not qcow2, or truncated) "
        "but Glance disk_format is qcow2",
        False,
    ),
    (
        "qcow2 truncated after its header",
        corpus.truncated_qcow2_body,
        "qcow2",
        "qcow2 image is corrupt or truncated (qemu-img check: 3 corruptions, 0 check errors)",
        True,
    ),
    (
        "gpt/iso polyglot declared raw",
        corpus.gpt_iso_polyglot,
        "raw",
        "iso+gpt polyglot whose MBR/GPT part fails the safety check "
        "(mbr: MBR PTE 0 has invalid boot flag)",
        False,
    ),
    (
        "gpt/iso polyglot declared iso",
        corpus.gpt_iso_polyglot,
        "iso",
        "iso+gpt polyglot whose MBR/GPT part fails the safety check "
        "(mbr: MBR PTE 0 has invalid boot flag)",
        False,
    ),
    (
        "qcow2/iso polyglot",
        corpus.qcow2_iso_polyglot,
        "qcow2",
        "content matches several formats at once (iso, qcow2): a polyglot image is refused",
        False,
    ),
]


class Witness:
    """Records every file the inspection opens and every qemu-img command it runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: list[str] = []
        self.commands: list[tuple[str, ...]] = []
        real_open, real_execute = builtins.open, qemu.execute

        def spy_open(file: Any, *args: Any, **kwargs: Any) -> Any:
            self.opened.append(str(file))
            return real_open(file, *args, **kwargs)

        def spy_execute(*cmd: str, **kwargs: Any) -> Any:
            self.commands.append(cmd)
            return real_execute(*cmd, **kwargs)

        monkeypatch.setattr(format_stream, "open", spy_open, raising=False)
        monkeypatch.setattr(qemu, "execute", spy_execute)


@pytest.mark.parametrize(
    ("builder", "disk_format", "reason", "qemu_may_run"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_hostile_image_is_refused(
    conf: cfg.ConfigOpts,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    builder: Builder,
    disk_format: str,
    reason: str,
    qemu_may_run: bool,
) -> None:
    image = builder(tmp_path)
    witness = Witness(monkeypatch)
    with pytest.raises(exception.ImageFormatRejected) as caught:
        format_safety.inspect_image(str(image), disk_format, conf, image_id="hostile")
    assert caught.value.kwargs["reason"] == reason
    assert witness.opened == [str(image)]
    if qemu_may_run:
        assert all(cmd[-1] == str(image) and "-f" in cmd for cmd in witness.commands)
    else:
        assert witness.commands == [], "qemu-img ran on an image the inspector refused"


@pytest.mark.parametrize(
    ("builder", "disk_format", "reason"),
    [case[1:4] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_hostile_image_is_refused_while_streaming(
    conf: cfg.ConfigOpts,
    tmp_path: pathlib.Path,
    builder: Builder,
    disk_format: str,
    reason: str,
) -> None:
    """The download path's variant: chunks fed as written, same verdict (or an earlier one)."""
    image = builder(tmp_path)
    stream = format_safety.StreamInspection("hostile", disk_format)
    with pytest.raises(exception.ImageFormatRejected) as caught:
        with open(image, "rb") as f:
            while chunk := f.read(64 * 1024):
                stream.feed(chunk)
        format_safety.inspect_image(
            str(image), disk_format, conf, image_id="hostile", stream=stream
        )
    got = caught.value.kwargs["reason"]
    assert got == reason or got.startswith(f"content does not match disk_format {disk_format}")


def test_vmdk_flat_refused_even_when_its_type_is_allowed(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator allowing monolithicFlat still cannot make a host-file extent pass."""
    conf.set_override("vmdk_allowed_types", ["monolithicFlat"], group="compute")
    image = corpus.vmdk_flat_passwd(tmp_path)
    witness = Witness(monkeypatch)
    with pytest.raises(exception.ImageFormatRejected) as caught:
        format_safety.inspect_image(str(image), "vmdk", conf)
    assert caught.value.kwargs["reason"] == (
        "vmdk image fails the safety check (descriptor: Unsupported subformat)"
    )
    assert witness.commands == []


@pytest.mark.parametrize(
    ("builder", "disk_format", "detected"),
    [
        (corpus.qcow2_with_data, "qcow2", "qcow2"),
        (corpus.raw, "raw", "raw"),
        (corpus.vmdk, "vmdk", "vmdk"),
        (lambda d: corpus.gpt_iso_polyglot(d, valid_mbr=True), "iso", "iso"),
    ],
)
def test_honest_images_pass(
    conf: cfg.ConfigOpts,
    tmp_path: pathlib.Path,
    builder: Builder,
    disk_format: str,
    detected: str,
) -> None:
    got = format_safety.inspect_image(str(builder(tmp_path)), disk_format, conf)
    assert got.detected == detected
    assert got.virtual_size > 0
