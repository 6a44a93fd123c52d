"""Image look-ups by id through the configured image source (here the local directory one)."""

from __future__ import annotations

import io
import pathlib

import pytest
import webtest
from oslo_config import cfg

from fleetcache.image import local
from tests.functional.api.helpers import MEMBER, fault

MISSING = "99999999-9999-9999-9999-999999999999"


@pytest.fixture
def images(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> list[str]:
    directory = tmp_path / "images"
    directory.mkdir()
    conf.set_override("backend", "local", group="image_source")
    conf.set_override("local_directory", str(directory), group="image_source")
    ids = []
    for name, status in (("cirros", "active"), ("ubuntu", "active"), ("new", "queued")):
        meta = local.add_image(str(directory), io.BytesIO(b"x" * 10), name=name, status=status)
        ids.append(meta.id)
    return ids


def test_show_by_id(app: webtest.TestApp, images: list[str]) -> None:
    image = app.get(f"/v2.1/images/{images[0]}").json["image"]
    assert image["id"] == images[0] and image["name"] == "cirros" and image["size"] == 10
    assert "locations" not in image and "direct_url" not in image


@pytest.mark.parametrize("which", ["missing", "queued", "cirros"])
def test_show_unknown_unusable_or_by_name_is_404(
    app: webtest.TestApp, images: list[str], which: str
) -> None:
    ident = {"missing": MISSING, "queued": images[2], "cirros": "cirros"}[which]
    fault(app.get(f"/v2.1/images/{ident}", expect_errors=True), "itemNotFound", 404)


def test_nova_style_id_in_filter(app: webtest.TestApp, images: list[str]) -> None:
    query = f"in:{images[0]},{MISSING},{images[1]},not-a-uuid"
    found = app.get("/v2.1/v2/images", {"id": query}).json["images"]
    assert [i["id"] for i in found] == [images[0], images[1]]
    assert app.get("/v2.1/v2/images", {"names": f"in:cirros,{images[0]}"}).json == {"images": []}


def test_osc_style_name_filter_finds_nothing(app: webtest.TestApp, images: list[str]) -> None:
    assert app.get("/v2.1/images", {"name": "cirros"}).json == {"images": []}
    assert app.get("/v2.1/images", {"id": images[1]}).json["images"][0]["name"] == "ubuntu"


def test_member_is_forbidden(app: webtest.TestApp, images: list[str]) -> None:
    response = app.get(f"/v2.1/images/{images[0]}", headers=MEMBER, expect_errors=True)
    assert "fleetcache:images:show" in fault(response, "forbidden", 403)
