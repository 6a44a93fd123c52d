"""Unit tests of rbd:// location parsing (fleetcache.image.rbd_location)."""

from __future__ import annotations

import pathlib

import pytest

from fleetcache.image.rbd_location import (
    InvalidRbdUrl,
    RbdLocation,
    parse_rbd_url,
    rbd_urls,
    read_fsid,
)
from fleetcache.image.source import ImageMeta

FSID = "7d3c1f0e-2a4b-4c5d-8e9f-0a1b2c3d4e5f"
IMAGE = "8c4f0d5e-1a2b-4c3d-9e8f-7a6b5c4d3e2f"


def test_glances_url_parses() -> None:
    assert parse_rbd_url(f"rbd://{FSID}/images/{IMAGE}/snap") == RbdLocation(
        FSID, "images", IMAGE, "snap")
    assert parse_rbd_url(f"rbd://{FSID.upper()}/images/{IMAGE}/snap").fsid == FSID


@pytest.mark.parametrize("url", [
    f"rbd://{FSID}/images/{IMAGE}",                 # three parts
    f"rbd://{FSID}/images/{IMAGE}/snap/extra",      # five parts
    f"rbd://{FSID}/images/{IMAGE}/snap/",           # trailing slash: an empty fifth
    f"rbd://{FSID}/images//snap",                   # empty image
    f"rbd:///images/{IMAGE}/snap",                  # no fsid
    f"rbd://not-a-uuid/images/{IMAGE}/snap",
    f"rbd://{FSID}:6789/images/{IMAGE}/snap",       # port
    f"rbd://admin@{FSID}/images/{IMAGE}/snap",      # user
    f"rbd://{FSID}/images/{IMAGE}/snap?x=1",        # query
    f"rbd://{FSID}/images/{IMAGE}/snap#f",          # fragment
    f"rbd://{FSID}/-images/{IMAGE}/snap",           # option-like pool
    f"rbd://{FSID}/images/--path=x/snap",           # option-like image
    f"rbd://{FSID}/images/{IMAGE}/-s",              # option-like snapshot
    f"rbd://{FSID}/images/../snap",                 # dot-dot
    f"rbd://{FSID}/images/a%2Fb/snap",              # percent-escape
    f"rbd://{FSID}/images/a;id/snap",               # shell characters
    f"rbd://{FSID}/images/a b/snap",
    f"rbd://{FSID}/images/a@b/snap",
    f"http://{FSID}/images/{IMAGE}/snap",           # another scheme
    f"rbd:{FSID}/images/{IMAGE}/snap",              # no authority
])
def test_anything_else_is_refused(url: str) -> None:
    with pytest.raises(InvalidRbdUrl):
        parse_rbd_url(url)


def test_rbd_urls_come_from_locations_then_direct_url_once() -> None:
    first, second = f"rbd://{FSID}/images/a/snap", f"rbd://{FSID}/images/b/snap"
    meta = ImageMeta(id="i", direct_url=first, locations=[
        {"url": "file:///x", "metadata": {}}, {"url": second, "metadata": {}},
        {"url": first, "metadata": {}}])
    assert list(rbd_urls(meta)) == [second, first]
    assert list(rbd_urls(ImageMeta(id="i", direct_url="file:///var/lib/glance/i"))) == []


def test_read_fsid_reads_global_of_an_indented_ceph_conf(tmp_path: pathlib.Path) -> None:
    conf = tmp_path / "ceph.conf"
    conf.write_text(f"# cluster\n[client]\n\tfsid = {IMAGE}\n[global]\n\tmon_host = x\n"
                    f"\tfsid = {FSID.upper()}   ; ours\n")
    assert read_fsid(str(conf)) == FSID
    conf.write_text("[global]\nmon_host = x\n")
    with pytest.raises(ValueError, match="no fsid"):
        read_fsid(str(conf))
