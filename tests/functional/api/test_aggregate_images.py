"""POST /os-aggregates/{id}/images (2.81) and the jobs resource beside it."""

from __future__ import annotations

import pytest
import webtest

from fleetcache.common import exception
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import jobs as db_jobs
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import (
    LATEST,
    MEMBER,
    StubConductorAPI,
    create_aggregate,
    fault,
)

IMG1 = "11111111-1111-1111-1111-111111111111"
IMG2 = "22222222-2222-2222-2222-222222222222"
IMAGES = "/v2.1/os-aggregates/1/images"
JOBS = IMAGES + "/jobs"


@pytest.fixture
def aggregate(app: webtest.TestApp, computes: list[str]) -> dict[str, object]:
    agg = create_aggregate(app, "agg1")
    for host in computes:
        app.post_json("/v2.1/os-aggregates/1/action", {"add_host": {"host": host}})
    return agg


def _cache(app: webtest.TestApp, body: object, **kw: object) -> webtest.TestResponse:
    headers = kw.pop("headers", LATEST)
    return app.post_json(IMAGES, body, headers=headers, **kw)  # type: ignore[arg-type]


def test_cache_returns_202_empty_with_location(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI, db: Database
) -> None:
    response = _cache(app, {"cache": [{"id": IMG1}, {"id": IMG2}]})
    assert response.status_int == 202
    assert response.body == b""
    assert conductor.calls == [(1, [IMG1, IMG2])]
    job = db_jobs.job_list(db, aggregate_id=1)[0]
    assert response.headers["Location"] == f"http://localhost{JOBS}/{job['uuid']}"


def test_cache_below_281_is_404_like_an_unknown_route(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI
) -> None:
    for headers in ({}, {"OpenStack-API-Version": "compute 2.80"}):
        response = _cache(app, {"cache": [{"id": IMG1}]}, headers=headers, expect_errors=True)
        fault(response, "itemNotFound", 404)
    assert conductor.calls == []


def test_cache_at_latest_and_legacy_header(
    app: webtest.TestApp, aggregate: dict[str, object]
) -> None:
    assert _cache(app, {"cache": [{"id": IMG1}]},
                  headers={"X-OpenStack-Nova-API-Version": "latest"}).status_int == 202


def test_duplicate_images_are_400(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI
) -> None:
    response = _cache(app, {"cache": [{"id": IMG1}, {"id": IMG1}]}, expect_errors=True)
    assert fault(response, "badRequest", 400) == "Duplicate images in request"
    assert conductor.calls == []


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"cache": []},
        {"cache": [{"id": "not-a-uuid"}]},
        {"cache": [{"id": IMG1, "name": "cirros"}]},
        {"cache": [{}]},
        {"cache": [{"id": IMG1}], "extra": True},
        {"cache": {"id": IMG1}},
        {"cache": [IMG1]},
    ],
)
def test_schema_errors_are_400(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
    body: object,
) -> None:
    fault(_cache(app, body, expect_errors=True), "badRequest", 400)
    assert conductor.calls == []


def test_unknown_aggregate_is_404(app: webtest.TestApp, conductor: StubConductorAPI) -> None:
    fault(_cache(app, {"cache": [{"id": IMG1}]}, expect_errors=True), "itemNotFound", 404)
    response = app.post_json("/v2.1/os-aggregates/x/images", {"cache": [{"id": IMG1}]},
                             headers=LATEST, expect_errors=True)
    fault(response, "itemNotFound", 404)
    assert conductor.calls == []


def test_member_is_forbidden(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI
) -> None:
    response = _cache(app, {"cache": [{"id": IMG1}]}, headers={**LATEST, **MEMBER},
                      expect_errors=True)
    assert "compute:aggregates:images" in fault(response, "forbidden", 403)
    assert conductor.calls == []


@pytest.mark.parametrize(
    "error",
    [
        exception.ImageNotFound(image_id=IMG1),
        exception.ImageNotAvailable(image_id=IMG1, reason="status is queued"),
    ],
)
def test_conductor_image_errors_are_400(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
    error: Exception,
) -> None:
    conductor.error = error
    response = _cache(app, {"cache": [{"id": IMG1}]}, expect_errors=True)
    assert IMG1 in fault(response, "badRequest", 400)


def test_conductor_aggregate_not_found_is_404(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI
) -> None:
    conductor.error = exception.AggregateNotFound(aggregate_id=1)
    fault(_cache(app, {"cache": [{"id": IMG1}]}, expect_errors=True), "itemNotFound", 404)


def _job_with_results(db: Database) -> db_jobs.JobDict:
    uuid = db_aggregates.aggregate_get(db, 1)["uuid"]
    job = db_jobs.job_create(db, 1, uuid, [IMG1, IMG2], 3, "cond1")
    db_jobs.job_set_state(db, job["uuid"], db_jobs.RUNNING)

    def result(state: str, reason: str | None = None, size: int = 0, path: str | None = None,
               fallback: str | None = None) -> db_jobs.ResultFields:
        return db_jobs.ResultFields(state=state, reason=reason, bytes_downloaded=size,
                                    download_path=path, fallback_reason=fallback)

    db_jobs.job_record_hosts(db, job["uuid"], {
        "c1": {IMG1: result("cached", size=100, path="rbd"), IMG2: result("existing")},
        "c2": {IMG1: result("error", "checksum mismatch"),
               IMG2: result("cached", size=50, path="http", fallback="fsid mismatch: x")},
        "c3": {IMG1: result("skipped", "down"), IMG2: result("skipped", "down")},
    })
    db_jobs.job_set_state(db, job["uuid"], db_jobs.DONE)
    return db_jobs.job_get(db, job["uuid"])


def test_job_show_has_state_counts_and_per_host_results(
    app: webtest.TestApp, aggregate: dict[str, object], db: Database
) -> None:
    job = _job_with_results(db)
    shown = app.get(f"{JOBS}/{job['uuid']}", headers=LATEST).json["job"]
    assert shown["id"] == job["uuid"] and shown["state"] == "done"
    assert shown["image_ids"] == [IMG1, IMG2]
    assert shown["total_hosts"] == 3 and shown["hosts_reported"] == 3
    assert shown["counts"] == {"cached": 2, "existing": 1, "error": 1, "unsupported": 0,
                               "skipped": 2, "pending": 0, "waiting": 0}
    assert shown["bytes_downloaded"] == 150
    assert shown["started_at"] and shown["finished_at"]
    assert shown["links"][0]["href"].endswith(f"{JOBS}/{job['uuid']}")
    hosts = {h["host"]: h for h in shown["hosts"]}
    assert hosts["c1"]["bytes_downloaded"] == 100
    assert hosts["c2"]["images"][0] == {
        "image_id": IMG1, "state": "error", "reason": "checksum mismatch",
        "bytes_downloaded": 0, "download_path": None, "fallback_reason": None,
        "source_host": None, "bytes_from_peers": None,
        "updated_at": hosts["c2"]["images"][0]["updated_at"],
    }
    assert [(i["download_path"], i["fallback_reason"]) for i in hosts["c1"]["images"]] == [
        ("rbd", None), (None, None)]
    assert (hosts["c2"]["images"][1]["download_path"],
            hosts["c2"]["images"][1]["fallback_reason"]) == ("http", "fsid mismatch: x")
    assert [i["reason"] for i in hosts["c3"]["images"]] == ["down", "down"]


def test_job_show_says_where_the_copies_came_from(
    app: webtest.TestApp, aggregate: dict[str, object], db: Database
) -> None:
    uuid = db_aggregates.aggregate_get(db, 1)["uuid"]
    job = db_jobs.job_create(db, 1, uuid, [IMG1], 3, "cond1")
    db_jobs.job_set_state(db, job["uuid"], db_jobs.RUNNING)
    unfinished = app.get(f"{JOBS}/{job['uuid']}", headers=LATEST).json["job"]
    assert unfinished["distribution"]["time_to_all_hosts"] is None
    db_jobs.job_record_hosts(db, job["uuid"], {
        "c1": {IMG1: db_jobs.ResultFields(state="cached", reason=None, bytes_downloaded=100,
                                          download_path="http")},
        "c2": {IMG1: db_jobs.ResultFields(state="cached", reason=None, bytes_downloaded=100,
                                          download_path="peer", source_host="c1",
                                          bytes_from_peers=100)},
        "c3": {IMG1: db_jobs.ResultFields(state="cached", reason=None, bytes_downloaded=100,
                                          download_path="http", bytes_from_peers=40,
                                          fallback_reason="peer_failed: c2: refused")},
    })

    shown = app.get(f"{JOBS}/{job['uuid']}", headers=LATEST).json["job"]

    spread = shown["distribution"]
    assert (spread["origin_copies"], spread["peer_copies"]) == (2, 1)
    assert (spread["bytes_from_origin"], spread["bytes_from_peers"]) == (160, 140)
    assert spread["offload_percent"] == 46.7
    assert spread["time_to_all_hosts"] >= 0
    c2 = next(h for h in shown["hosts"] if h["host"] == "c2")["images"][0]
    assert (c2["download_path"], c2["source_host"], c2["bytes_from_peers"]) == (
        "peer", "c1", 100)


def test_job_show_matches_its_openapi_schema(
    app: webtest.TestApp, aggregate: dict[str, object], db: Database
) -> None:
    import jsonschema

    job = _job_with_results(db)
    shown = app.get(f"{JOBS}/{job['uuid']}", headers=LATEST).json["job"]
    document = app.get("/openapi.json").json
    schema = {"$ref": "#/components/schemas/JobDetail", "components": document["components"]}
    jsonschema.Draft202012Validator(schema).validate(shown)
    detail = document["components"]["schemas"]["JobDetail"]["allOf"][1]
    image = detail["properties"]["hosts"]["items"]["properties"]["images"]["items"]
    assert {"download_path", "fallback_reason"} <= set(image["required"])


def test_job_from_location_header(app: webtest.TestApp, aggregate: dict[str, object]) -> None:
    location = _cache(app, {"cache": [{"id": IMG1}]}).headers["Location"]
    job = app.get(location, headers=LATEST).json["job"]
    assert job["state"] == "queued" and job["total_hosts"] == 3 and job["hosts"] == []
    assert job["counts"]["cached"] == 0


def test_job_list_newest_first_without_hosts(
    app: webtest.TestApp, aggregate: dict[str, object], db: Database
) -> None:
    first = _job_with_results(db)
    _cache(app, {"cache": [{"id": IMG2}]})
    jobs = app.get(JOBS, headers=LATEST).json["jobs"]
    assert len(jobs) == 2 and jobs[1]["id"] == first["uuid"]
    assert jobs[0]["image_ids"] == [IMG2] and "hosts" not in jobs[0]
    assert jobs[1]["counts"]["skipped"] == 2


def test_job_list_of_aggregate_without_jobs_is_empty(
    app: webtest.TestApp, aggregate: dict[str, object]
) -> None:
    assert app.get(JOBS, headers=LATEST).json == {"jobs": []}


def test_job_errors(app: webtest.TestApp, aggregate: dict[str, object], db: Database) -> None:
    job = _job_with_results(db)
    create_aggregate(app, "other")
    missing = "99999999-9999-9999-9999-999999999999"
    fault(app.get(f"{JOBS}/{missing}", headers=LATEST, expect_errors=True), "itemNotFound", 404)
    other = f"/v2.1/os-aggregates/2/images/jobs/{job['uuid']}"
    fault(app.get(other, headers=LATEST, expect_errors=True), "itemNotFound", 404)
    fault(app.get("/v2.1/os-aggregates/7/images/jobs", headers=LATEST, expect_errors=True),
          "itemNotFound", 404)
    fault(app.get(JOBS, expect_errors=True), "itemNotFound", 404)  # below 2.81
    response = app.get(f"{JOBS}/{job['uuid']}", headers={**LATEST, **MEMBER}, expect_errors=True)
    assert "fleetcache:aggregates:images:jobs" in fault(response, "forbidden", 403)
    response = app.get(JOBS, headers={**LATEST, **MEMBER}, expect_errors=True)
    fault(response, "forbidden", 403)


def test_jobs_of_a_deleted_aggregate(
    app: webtest.TestApp, aggregate: dict[str, object], db: Database
) -> None:
    job = _job_with_results(db)
    for host in ("c1", "c2", "c3"):
        app.post_json("/v2.1/os-aggregates/1/action", {"remove_host": {"host": host}})
    app.delete("/v2.1/os-aggregates/1")
    # Still readable through its Location, while the list of the gone aggregate is a 404.
    assert app.get(f"{JOBS}/{job['uuid']}", headers=LATEST).json["job"]["state"] == "done"
    fault(app.get(JOBS, headers=LATEST, expect_errors=True), "itemNotFound", 404)
    # A new aggregate that gets the same id (SQLite reuses ids) does not inherit the job.
    with db.transaction() as session:
        from fleetcache.common.db import models

        session.add(models.Aggregate(id=1, uuid="new-uuid", name="reborn"))
    assert app.get(JOBS, headers=LATEST).json == {"jobs": []}
    fault(app.get(f"{JOBS}/{job['uuid']}", headers=LATEST, expect_errors=True),
          "itemNotFound", 404)


@pytest.mark.parametrize("error", ["MessagingTimeout", "MessageDeliveryFailure",
                                   "MessageUndeliverable"])
def test_conductor_unreachable_is_503(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
    error: str,
) -> None:
    import oslo_messaging

    cls = getattr(oslo_messaging, error)
    conductor.error = (cls(Exception("gone"), "conductor", "cache_images", None)
                       if error == "MessageUndeliverable" else cls("no reply"))
    fault(_cache(app, {"cache": [{"id": IMG1}]}, expect_errors=True), "serviceUnavailable", 503)
