"""Unit tests of the local directory image source (fleetcache.image.local)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.image.local import LocalImageSource, add_image
from tests.unit.image.fixtures import make_conf

CTXT = RequestContext()
DATA = os.urandom(5 * 1024 * 1024 + 3)


def _source(directory: pathlib.Path) -> LocalImageSource:
    return LocalImageSource(make_conf(image_source__local_directory=str(directory)))


def test_add_image_computes_size_and_hashes(tmp_path: pathlib.Path) -> None:
    meta = add_image(str(tmp_path), io.BytesIO(DATA), name="cirros", disk_format="qcow2",
                     properties={"os_distro": "cirros"})
    assert meta.size == len(DATA)
    assert meta.checksum == hashlib.md5(DATA).hexdigest()
    assert (meta.os_hash_algo, meta.os_hash_value) == ("sha512", hashlib.sha512(DATA).hexdigest())
    assert (tmp_path / meta.id).read_bytes() == DATA
    body = json.loads((tmp_path / f"{meta.id}.json").read_text())
    assert body["os_distro"] == "cirros" and body["disk_format"] == "qcow2"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_add_image_from_a_path(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "src.img"
    src.write_bytes(b"abc")
    meta = add_image(str(tmp_path / "images"), str(src), image_id="img-1")
    assert meta.id == "img-1" and (tmp_path / "images" / "img-1").read_bytes() == b"abc"


def test_show_and_download_round_trip(tmp_path: pathlib.Path) -> None:
    added = add_image(str(tmp_path), io.BytesIO(DATA), properties={"k": "v"})
    source = _source(tmp_path)
    meta = source.show(CTXT, added.id)
    assert meta == added
    out = io.BytesIO()
    progress: list[int] = []
    assert source.download(CTXT, meta, out, progress.append) == len(DATA)
    assert out.getvalue() == DATA and progress[-1] == len(DATA)


def test_show_missing_is_not_found(tmp_path: pathlib.Path) -> None:
    with pytest.raises(exception.ImageNotFound):
        _source(tmp_path).show(CTXT, "missing")


@pytest.mark.parametrize("image_id", ["../etc/passwd", ".hidden", "a/b", "x.json", ""])
def test_ids_that_are_not_plain_names_are_not_found(tmp_path: pathlib.Path,
                                                    image_id: str) -> None:
    with pytest.raises(exception.ImageNotFound):
        _source(tmp_path).show(CTXT, image_id)


def test_inactive_image_is_not_available(tmp_path: pathlib.Path) -> None:
    meta = add_image(str(tmp_path), io.BytesIO(b"x"), status="deactivated")
    with pytest.raises(exception.ImageNotAvailable, match="'deactivated'"):
        _source(tmp_path).show(CTXT, meta.id)


def test_download_without_data_is_not_available(tmp_path: pathlib.Path) -> None:
    meta = add_image(str(tmp_path), io.BytesIO(b"x"))
    (tmp_path / meta.id).unlink()
    with pytest.raises(exception.ImageNotAvailable, match="no data"):
        _source(tmp_path).download(CTXT, meta, io.BytesIO())


def test_download_from_an_offset_writes_the_rest(tmp_path: pathlib.Path) -> None:
    conf = make_conf(image_source__local_directory=str(tmp_path))
    meta = add_image(str(tmp_path), io.BytesIO(b"0123456789"))
    out = io.BytesIO()
    assert LocalImageSource(conf).download_from(RequestContext(), meta, out, 4) == 6
    assert out.getvalue() == b"456789"
