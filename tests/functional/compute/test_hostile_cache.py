"""The hostile image corpus through the whole compute path: the local image source
(``add_image``), the disk driver's ``cache_image`` and the compute manager over RPC (``fake://``).

Each image is refused with its precise reason, nothing lands in ``_base`` (no cached file, no
temporary file), qemu-img never runs on an image the inspector refused nor on any other file
than the download, and the compute's per-image result carries the reason.
"""

from __future__ import annotations

import io
import os
import pathlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.common import exception, rpc
from fleetcache.common.context import RequestContext
from fleetcache.compute import rpcapi
from fleetcache.compute.imagecache import cache_name
from fleetcache.compute.manager import ComputeManager
from fleetcache.compute.virt.disk import DiskDriver
from fleetcache.compute.virt.driver import load_compute_driver
from fleetcache.image import qemu
from fleetcache.image.local import add_image
from tests import hostile_images as corpus

Builder = Callable[[pathlib.Path], pathlib.Path]

# (name, builder, declared disk_format, exact reason, whether qemu-img may run on the download)
CASES: list[tuple[str, Builder, str, str, bool]] = [
    ("qcow2 backed by /etc/passwd", corpus.qcow2_backing_passwd, "qcow2",
     "qcow2 image fails the safety check (backing_file: Image has a backing file)", False),
    ("qcow2 with a data-file", corpus.qcow2_data_file, "qcow2",
     "qcow2 image fails the safety check (data_file: Image has data_file set)", False),
    ("VMDK monolithicFlat naming /etc/passwd", corpus.vmdk_flat_passwd, "vmdk",
     "VMDK create-type monolithicflat is not in [compute] vmdk_allowed_types "
     "(streamOptimized, monolithicSparse)", False),
    # Refused while streaming, as soon as the first chunk shows it has no qcow2 header.
    ("raw declared qcow2", corpus.raw, "qcow2",
     "content does not match disk_format qcow2: Content does not match expected format "
     "'qcow2'", False),
    ("qcow2 declared raw", corpus.qcow2, "raw",
     "content is qcow2 but Glance disk_format is raw", False),
    ("qcow2 truncated inside its header", corpus.truncated_qcow2_header, "qcow2",
     "content is raw (no complete qcow2 header: not qcow2, or truncated) "
     "but Glance disk_format is qcow2", False),
    ("qcow2 truncated after its header", corpus.truncated_qcow2_body, "qcow2",
     "qcow2 image is corrupt or truncated (qemu-img check: 3 corruptions, 0 check errors)",
     True),
    ("gpt/iso polyglot declared raw", corpus.gpt_iso_polyglot, "raw",
     "iso+gpt polyglot whose MBR/GPT part fails the safety check "
     "(mbr: MBR PTE 0 has invalid boot flag)", False),
    ("gpt/iso polyglot declared iso", corpus.gpt_iso_polyglot, "iso",
     "iso+gpt polyglot whose MBR/GPT part fails the safety check "
     "(mbr: MBR PTE 0 has invalid boot flag)", False),
    ("qcow2/iso polyglot", corpus.qcow2_iso_polyglot, "qcow2",
     "content matches several formats at once (iso, qcow2): a polyglot image is refused", False),
]
IDS = [case[0] for case in CASES]


@pytest.fixture
def driver(conf: cfg.ConfigOpts) -> DiskDriver:
    loaded = load_compute_driver(conf)
    assert isinstance(loaded, DiskDriver)
    loaded.init_host(conf.host)
    return loaded


@pytest.fixture
def compute(conf: cfg.ConfigOpts, driver: DiskDriver) -> Iterator[rpcapi.ComputeAPI]:
    transports = rpc.Transports(conf)
    transport = transports.get("fake:///")
    server = rpc.get_server(transport, rpcapi.TOPIC, conf.host, [ComputeManager(conf, driver)])
    server.start()
    try:
        yield rpcapi.ComputeAPI(conf, transport)
    finally:
        server.stop()
        server.wait()
        transports.cleanup()


@pytest.fixture
def qemu_commands(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    commands: list[tuple[str, ...]] = []
    real = qemu.execute

    def spy(*cmd: str, **kwargs: Any) -> Any:
        commands.append(cmd)
        return real(*cmd, **kwargs)

    monkeypatch.setattr(qemu, "execute", spy)
    return commands


def _base(conf: cfg.ConfigOpts) -> list[str]:
    return os.listdir(pathlib.Path(conf.instances_path) / "_base")


@pytest.mark.parametrize(("builder", "disk_format", "reason", "qemu_may_run"),
                         [case[1:] for case in CASES], ids=IDS)
def test_cache_image_refuses_hostile_image(
        conf: cfg.ConfigOpts, driver: DiskDriver, tmp_path: pathlib.Path,
        qemu_commands: list[tuple[str, ...]], builder: Builder, disk_format: str, reason: str,
        qemu_may_run: bool) -> None:
    meta = add_image(conf.image_source.local_directory, str(builder(tmp_path)),
                     disk_format=disk_format)
    with pytest.raises(exception.ImageFormatRejected) as caught:
        driver.cache_image(RequestContext(), meta.id)
    assert caught.value.kwargs == {"image_id": meta.id, "reason": reason}
    assert _base(conf) == []
    downloads = {cmd[-1] for cmd in qemu_commands}
    if qemu_may_run:
        assert len(downloads) == 1
        (download,) = downloads
        assert os.path.basename(download).startswith(f".{cache_name(meta.id)}.part-")
        assert all(cmd[:2] in {("qemu-img", "info"), ("qemu-img", "check")}
                   and "-f" in cmd for cmd in qemu_commands)
    else:
        assert qemu_commands == [], "qemu-img ran on an image the inspector refused"


def test_compute_manager_reports_each_reason(conf: cfg.ConfigOpts, compute: rpcapi.ComputeAPI,
                                            tmp_path: pathlib.Path) -> None:
    images = conf.image_source.local_directory
    expected: dict[str, str] = {}
    for _name, builder, disk_format, reason, _qemu in CASES:
        workdir = tmp_path / uuid.uuid4().hex
        workdir.mkdir()
        meta = add_image(images, str(builder(workdir)), disk_format=disk_format)
        expected[meta.id] = f"Image {meta.id} was refused by format inspection: {reason}"
    partly_signed = add_image(images, io.BytesIO(b"\0" * 65536), properties={
        "img_signature": "c2lnbmF0dXJl", "img_signature_hash_method": "SHA-256"})
    expected[partly_signed.id] = (
        f"Signature verification of image {partly_signed.id} failed: the image is partly "
        "signed: missing img_signature_key_type, img_signature_certificate_uuid")
    conf.set_override("verify_glance_signatures", True, group="glance")
    honest = add_image(images, str(corpus.qcow2_with_data(tmp_path)), disk_format="qcow2")

    results = compute.cache_images(RequestContext(), conf.host, [*expected, honest.id])

    assert {i: r for i, r in results.items() if i != honest.id} == {
        i: {"state": "error", "reason": reason, "bytes_downloaded": 0}
        for i, reason in expected.items()}
    assert results[honest.id]["state"] == "cached"
    assert _base(conf) == [cache_name(honest.id)]
