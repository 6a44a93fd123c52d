"""The image cache's download pipeline beyond size and hash
(fleetcache.compute.imagecache.download): signatures and format inspection fed while
streaming, publication by the backend plan, the rule on images without a disk format."""

from __future__ import annotations

import functools
import io
import json
import os
import pathlib

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import ImageCache, odirect, require_disk_format
from fleetcache.image import format_safety, qemu, signature
from fleetcache.image.glance import GlanceImageSource
from fleetcache.image.local import LocalImageSource, add_image
from fleetcache.image.source import ImageMeta, ProgressCallback, Writer
from tests import hostile_images as corpus
from tests.unit.image.fakeglance import FakeGlance
from tests.unit.image.fixtures import make_conf
from tests.unit.image.signing import Signer

CTXT = RequestContext()
DATA = os.urandom(1024 * 1024 + 3)


class CountingSource(LocalImageSource):
    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.downloads = 0

    def download(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                 progress: ProgressCallback | None = None) -> int:
        self.downloads += 1
        return super().download(ctxt, meta, writer, progress)


def _cache(tmp_path: pathlib.Path, signer: Signer | None = None, **conf: object) -> ImageCache:
    config = make_conf(instances_path=str(tmp_path / "instances"),
                       image_source__local_directory=str(tmp_path / "images"),
                       glance__download_chunk_size=65536, **conf)
    checks = () if signer is None else (functools.partial(
        signature.signature_check, config, load_certificate=signer.load_certificate),)
    return ImageCache(config, CountingSource(config), checks)


def _add(tmp_path: pathlib.Path, data: bytes | pathlib.Path, **kw: object) -> ImageMeta:
    src = str(data) if isinstance(data, pathlib.Path) else io.BytesIO(data)
    return add_image(str(tmp_path / "images"), src, **kw)  # type: ignore[arg-type]


def _left(cache: ImageCache) -> list[str]:
    return sorted(os.listdir(cache.base_dir))


def _qemu_format(path: str) -> str:
    return str(json.loads(corpus.qemu_img("info", "--output=json", path))["format"])


def test_signed_image_is_verified_and_cached(tmp_path: pathlib.Path) -> None:
    signer = Signer()
    cache = _cache(tmp_path, signer, glance__verify_glance_signatures=True)
    meta = _add(tmp_path, DATA, properties=signer.properties(DATA))
    assert cache.fetch(CTXT, meta.id).downloaded
    assert pathlib.Path(cache.path_for(meta.id)).read_bytes() == DATA
    assert signer.loaded == [signer.cert_uuid]


def test_bad_signature_deletes_the_file_and_says_why(tmp_path: pathlib.Path) -> None:
    signer = Signer()
    cache = _cache(tmp_path, signer, glance__verify_glance_signatures=True)
    # hashes match these bytes; the signature not (one bit flipped: always a change)
    tampered = DATA[:100] + bytes([DATA[100] ^ 1]) + DATA[101:]
    meta = _add(tmp_path, tampered, properties=signer.properties(DATA))
    with pytest.raises(exception.ImageSignatureVerificationFailed,
                       match=f"image {meta.id} failed: the signature does not match"):
        cache.fetch(CTXT, meta.id)
    assert _left(cache) == []


def test_partly_signed_image_fails_before_any_byte_is_read(tmp_path: pathlib.Path) -> None:
    signer = Signer()
    cache = _cache(tmp_path, signer, glance__verify_glance_signatures=True)
    props = signer.properties(DATA)
    del props["img_signature_certificate_uuid"]
    meta = _add(tmp_path, DATA, properties=props)
    with pytest.raises(exception.ImageSignatureVerificationFailed, match="partly signed"):
        cache.fetch(CTXT, meta.id)
    assert isinstance(cache.source, CountingSource) and cache.source.downloads == 0
    assert _left(cache) == []


def test_signatures_are_ignored_when_the_option_is_off(tmp_path: pathlib.Path) -> None:
    signer = Signer()
    cache = _cache(tmp_path, signer)
    meta = _add(tmp_path, DATA, properties={**signer.properties(DATA), "img_signature": "AAAA"})
    assert cache.fetch(CTXT, meta.id).downloaded
    assert signer.loaded == []


def test_refused_format_leaves_nothing(tmp_path: pathlib.Path) -> None:
    cache = _cache(tmp_path)
    meta = _add(tmp_path, corpus.qcow2_backing_passwd(tmp_path), disk_format="qcow2")
    with pytest.raises(exception.ImageFormatRejected, match="backing_file: Image has a backing"):
        cache.fetch(CTXT, meta.id)
    assert _left(cache) == []


def test_uninspectable_format_is_refused_before_download(tmp_path: pathlib.Path) -> None:
    cache = _cache(tmp_path)
    meta = _add(tmp_path, DATA, disk_format="ploop")
    with pytest.raises(exception.ImageFormatRejected,
                       match="disk_format 'ploop' cannot be inspected safely"):
        cache.fetch(CTXT, meta.id)
    assert isinstance(cache.source, CountingSource) and cache.source.downloads == 0


def test_an_image_without_disk_format_is_not_available_yet(tmp_path: pathlib.Path) -> None:
    """Not "rejected": nothing is wrong with bytes that have not been uploaded yet. The same
    rule refuses it for an instance disk (test_instance_disks.py)."""
    meta = _add(tmp_path, DATA, disk_format=None)
    with pytest.raises(exception.ImageNotAvailable, match="it has no disk_format"):
        require_disk_format(meta)
    assert require_disk_format(_add(tmp_path, DATA, disk_format="qcow2")) == "qcow2"
    cache = _cache(tmp_path)
    with pytest.raises(exception.ImageNotAvailable, match="it has no disk_format"):
        cache.fetch(CTXT, meta.id)
    assert isinstance(cache.source, CountingSource) and cache.source.downloads == 0
    assert _left(cache) == []


def test_inspection_uses_the_streamed_bytes(tmp_path: pathlib.Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The format is decided from the chunks fed while writing: the file's headers are not
    read again (``detect_from_file`` is never called)."""
    monkeypatch.setattr(format_safety, "detect_from_file", None)
    cache = _cache(tmp_path, force_raw_images=False)
    meta = _add(tmp_path, corpus.qcow2_with_data(tmp_path), disk_format="qcow2")
    assert cache.fetch(CTXT, meta.id).downloaded
    assert _qemu_format(cache.path_for(meta.id)) == "qcow2"


def test_qcow2_is_converted_to_raw_for_a_flat_backend(tmp_path: pathlib.Path) -> None:
    cache = _cache(tmp_path, libvirt__images_type="flat")
    meta = _add(tmp_path, corpus.qcow2_with_data(tmp_path), disk_format="qcow2")
    assert cache.fetch(CTXT, meta.id).downloaded
    base = pathlib.Path(cache.path_for(meta.id))
    assert _qemu_format(str(base)) == "raw"
    assert base.read_bytes()[:30] == b"FLEETCACHE" * 3
    assert _left(cache) == [base.name]


def test_qcow2_stays_qcow2_for_a_qcow2_backend(tmp_path: pathlib.Path) -> None:
    cache = _cache(tmp_path, libvirt__images_type="qcow2", force_raw_images=False)
    meta = _add(tmp_path, corpus.qcow2_with_data(tmp_path), disk_format="qcow2")
    cache.fetch(CTXT, meta.id)
    assert _qemu_format(cache.path_for(meta.id)) == "qcow2"


def test_failed_conversion_is_a_fetch_error_and_leaves_nothing(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def convert(src: str, src_fmt: str, dst: str, dst_fmt: str = "raw", **_: object) -> None:
        pathlib.Path(dst).write_bytes(b"half")
        raise exception.QemuImgError(action="convert", reason="No space left on device")

    monkeypatch.setattr(qemu, "convert", convert)
    cache = _cache(tmp_path, libvirt__images_type="flat")
    meta = _add(tmp_path, corpus.qcow2(tmp_path), disk_format="qcow2")
    with pytest.raises(exception.ImageFetchError,
                       match="cannot convert it from qcow2 to raw for the flat backend: "
                             "qemu-img convert failed: No space left on device"):
        cache.fetch(CTXT, meta.id)
    assert _left(cache) == []


def test_inspection_and_signature_survive_a_range_resume(tmp_path: pathlib.Path) -> None:
    """A qcow2 whose download is cut twice: the same inspection and verifier see every byte
    once, in order, across the resumed requests."""
    data = corpus.qcow2_with_data(tmp_path).read_bytes()
    signer = Signer()
    with FakeGlance() as glance:
        body = glance.add(data, disk_format="qcow2", **signer.properties(data))
        glance.cuts = [10_000, 70_000]
        conf = make_conf(instances_path=str(tmp_path / "instances"),
                         glance__api_servers=[glance.url], glance__download_chunk_size=4096,
                         glance__verify_glance_signatures=True, force_raw_images=False)
        source = GlanceImageSource(conf)
        source.retry_delay = 0.01
        cache = ImageCache(conf, source, [functools.partial(
            signature.signature_check, conf, load_certificate=signer.load_certificate)])
        assert cache.fetch(CTXT, body["id"]).downloaded
        assert [h.get("range") is not None for h in glance.file_gets(body["id"])] == [
            False, True, True]
    assert pathlib.Path(cache.path_for(body["id"])).read_bytes() == data


def test_http_chunks_reach_the_disk_without_a_copy_in_the_writer_thread(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The base is written with O_DIRECT (tmp_path's ext4 takes it): each HTTP chunk of whole
    pages comes to the sink in an aligned buffer, so that only the file's tail is staged."""
    staged: list[int] = []
    stage = odirect.ODirectWriter._stage_copy

    def spy(sink: odirect.ODirectWriter, view: memoryview) -> None:
        staged.append(len(view))
        stage(sink, view)

    monkeypatch.setattr(odirect.ODirectWriter, "_stage_copy", spy)
    with FakeGlance() as glance:
        body = glance.add(DATA)
        conf = make_conf(instances_path=str(tmp_path / "instances"),
                         glance__api_servers=[glance.url], glance__download_chunk_size=65536)
        cache = ImageCache(conf, GlanceImageSource(conf))
        assert cache.fetch(CTXT, body["id"]).downloaded
    assert staged == [len(DATA) % 65536]
    assert pathlib.Path(cache.path_for(body["id"])).read_bytes() == DATA


def test_converted_base_is_durable_before_it_is_renamed(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """qemu-img does not flush its output: the staged conversion is fsynced, then renamed."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append(("replace", str(src)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    cache = _cache(tmp_path, libvirt__images_type="flat")
    meta = _add(tmp_path, corpus.qcow2(tmp_path), disk_format="qcow2")
    cache.fetch(CTXT, meta.id)
    staged = [path for event, path in events if path.endswith(".converted")]
    assert staged and events.index(("fsync", staged[0])) < events.index(("replace", staged[0]))
