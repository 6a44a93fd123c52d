"""Unit tests of the image source contract: ImageMeta and the plugin loader."""

from __future__ import annotations

import pytest

from fleetcache.common import exception
from fleetcache.image.glance import GlanceImageSource
from fleetcache.image.local import LocalImageSource
from fleetcache.image.source import ImageMeta, load_image_source
from tests.unit.image.fixtures import make_conf

GLANCE_BODY = {
    "id": "img", "name": "cirros", "status": "active", "disk_format": "qcow2",
    "container_format": "bare", "size": 10, "virtual_size": 20, "checksum": "c",
    "os_hash_algo": "sha512", "os_hash_value": "h", "visibility": "public", "tags": [],
    "self": "/v2/images/img", "file": "/v2/images/img/file", "schema": "/v2/schemas/image",
    "direct_url": "rbd://fsid/images/img/snap", "os_distro": "cirros", "trove": "true",
}


def test_meta_splits_properties_from_core_fields() -> None:
    meta = ImageMeta.from_dict(GLANCE_BODY)
    assert meta.properties == {"os_distro": "cirros", "trove": "true"}
    assert (meta.disk_format, meta.virtual_size, meta.direct_url) == (
        "qcow2", 20, "rbd://fsid/images/img/snap")


def test_meta_round_trips_through_its_dict() -> None:
    meta = ImageMeta.from_dict(GLANCE_BODY)
    assert ImageMeta.from_dict(meta.to_dict()) == meta


@pytest.mark.parametrize(("name", "cls"), [("glance", GlanceImageSource),
                                           ("local", LocalImageSource)])
def test_loader_builds_the_configured_source(name: str, cls: type) -> None:
    conf = make_conf(image_source__backend=name, glance__api_servers=["http://127.0.0.1:1"])
    assert type(load_image_source(conf)) is cls


def test_unknown_source_lists_the_known_ones() -> None:
    conf = make_conf(image_source__backend="nosuch")
    with pytest.raises(exception.InvalidConfiguration,
                       match=r"backend='nosuch' is unknown; known sources: \[.*'glance', 'local'"):
        load_image_source(conf)


def test_source_constructor_errors_propagate() -> None:
    with pytest.raises(exception.InvalidConfiguration, match="api_servers is empty"):
        load_image_source(make_conf(image_source__backend="glance"))
