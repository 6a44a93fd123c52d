"""``GET /v2.1/os-hosts/{host}/image-cache``: a compute's last cache report."""

from __future__ import annotations

import webtest

from fleetcache.common.db import host_images
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import MEMBER, fault

URL = "/v2.1/os-hosts/{}/image-cache"


def test_reported_cache_most_recent_first(
    app: webtest.TestApp, computes: list[str], db: Database
) -> None:
    host_images.set_host_images(db, "c1", [
        {"image_id": "old", "size": 10, "last_used": 1_700_000_000.0},
        {"image_id": "new", "size": 20, "last_used": 1_700_000_100.0},
    ], 4096, reported_at=1_700_000_200.0)
    body = app.get(URL.format("c1")).json["image_cache"]
    assert body["host"] == "c1"
    assert body["usage_bytes"] == 4096 and body["image_count"] == 2
    assert body["reported_at"] == "2023-11-14T22:16:40.000000"
    assert [i["image_id"] for i in body["images"]] == ["new", "old"]
    assert body["images"][0] == {"image_id": "new", "size": 20,
                                 "last_used": "2023-11-14T22:15:00.000000"}


def test_compute_without_report_is_empty(app: webtest.TestApp, computes: list[str]) -> None:
    body = app.get(URL.format("c2")).json["image_cache"]
    assert body == {"host": "c2", "usage_bytes": 0, "image_count": 0, "reported_at": None,
                    "images": []}


def test_unknown_host_is_404(app: webtest.TestApp, computes: list[str]) -> None:
    fault(app.get(URL.format("nope"), status=404), "itemNotFound", 404)
    fault(app.get(URL.format("x" * 300), status=404), "itemNotFound", 404)


def test_non_admin_is_forbidden(app: webtest.TestApp, computes: list[str]) -> None:
    fault(app.get(URL.format("c1"), headers=MEMBER, status=403), "forbidden", 403)
