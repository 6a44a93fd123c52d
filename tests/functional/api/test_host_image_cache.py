"""``GET /v2.1/os-hosts/{host}/image-cache``: a compute's last cache report."""

from __future__ import annotations

import datetime
import time

import webtest

from fleetcache.common.db import host_images, jobs
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
                                 "last_used": "2023-11-14T22:15:00.000000",
                                 "pinned_until": None}
    assert body["pending_catch_ups"] == []


def test_compute_without_report_is_empty(app: webtest.TestApp, computes: list[str]) -> None:
    body = app.get(URL.format("c2")).json["image_cache"]
    assert body == {"host": "c2", "usage_bytes": 0, "image_count": 0, "reported_at": None,
                    "images": [], "pending_catch_ups": []}


def test_unknown_host_is_404(app: webtest.TestApp, computes: list[str]) -> None:
    fault(app.get(URL.format("nope"), status=404), "itemNotFound", 404)
    fault(app.get(URL.format("x" * 300), status=404), "itemNotFound", 404)


def test_non_admin_is_forbidden(app: webtest.TestApp, computes: list[str]) -> None:
    fault(app.get(URL.format("c1"), headers=MEMBER, status=403), "forbidden", 403)


def test_pins_show_while_they_last(app: webtest.TestApp, computes: list[str],
                                   db: Database) -> None:
    now = time.time()
    host_images.set_host_images(db, "c1", [
        {"image_id": "pinned", "size": 1, "last_used": now - 2, "pinned_until": now + 3600},
        {"image_id": "ended", "size": 1, "last_used": now - 1, "pinned_until": now - 1},
        {"image_id": "plain", "size": 1, "last_used": now},
    ], 3, reported_at=now)
    images = {i["image_id"]: i for i in app.get(URL.format("c1")).json["image_cache"]["images"]}
    assert images["pinned"]["pinned_until"] == (
        host_images.from_epoch(now + 3600).isoformat(timespec="microseconds"))
    assert images["ended"]["pinned_until"] is None  # reported before its pin ended
    assert images["plain"]["pinned_until"] is None


def test_pending_catch_ups_name_the_jobs_waiting_for_the_host(
    app: webtest.TestApp, computes: list[str], db: Database
) -> None:
    until = datetime.datetime(2026, 11, 25, 19, 0, 0)
    job = jobs.job_create(db, 4, "8a1c6d1e-1111-4222-8333-944444444444", ["img-a"], 2, "cond",
                          catch_up_until=until)
    down = jobs.ResultFields(state=jobs.PENDING, reason="down", bytes_downloaded=0)
    jobs.job_record_hosts(db, job["uuid"], {"c2": {"img-a": down}})
    jobs.job_set_state(db, job["uuid"], jobs.CATCHING_UP)
    body = app.get(URL.format("c2")).json["image_cache"]
    assert body["pending_catch_ups"] == [{"job_id": job["uuid"], "aggregate_id": 4,
                                          "image_ids": ["img-a"],
                                          "until": "2026-11-25T19:00:00.000000"}]
    assert app.get(URL.format("c1")).json["image_cache"]["pending_catch_ups"] == []
