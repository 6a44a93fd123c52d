"""A pre-cache request's terms (``fleetcache:not_before``, ``window``, ``deadline``, limits,
``priority``) at ``OpenStack-API-Version: fleetcache 1.1``, and the job's view of them."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
import webtest
from oslo_config import cfg

from fleetcache.common.db import jobs as db_jobs
from fleetcache.common.db import models
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import LATEST, StubConductorAPI, create_aggregate, fault

IMG1 = "11111111-1111-1111-1111-111111111111"
IMAGES = "/v2.1/os-aggregates/1/images"
JOBS = IMAGES + "/jobs"
V1_1 = {"OpenStack-API-Version": "compute 2.81, fleetcache 1.1"}
TOMORROW = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)).strftime(
    "%Y-%m-%dT%H:%M:%SZ")
IN_TWO_DAYS = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=2)).strftime(
    "%Y-%m-%dT%H:%M:%SZ")
ALL_TERMS: dict[str, Any] = {
    "fleetcache:not_before": TOMORROW,
    "fleetcache:window": {"start": "22:00", "end": "05:00", "timezone": "Europe/Paris"},
    "fleetcache:deadline": IN_TWO_DAYS,
    "fleetcache:parallelism": 2,
    "fleetcache:origin_downloads": 1,
    "fleetcache:host_bytes_per_second": 8 * 1024 * 1024,
    "fleetcache:job_bytes_per_second": 16 * 1024 * 1024,
    "fleetcache:priority": 80,
}


@pytest.fixture
def conf(conf: cfg.ConfigOpts) -> cfg.ConfigOpts:
    """Caps the terms are judged against: 4 hosts at once, 2 downloads, 64 MiB/s a host."""
    conf.set_override("precache_concurrency", 4, group="image_cache")
    conf.set_override("max_concurrent_downloads", 2, group="image_cache")
    conf.set_override("max_download_bytes_per_second", 64 * 1024 * 1024, group="image_cache")
    return conf


@pytest.fixture
def aggregate(app: webtest.TestApp, computes: list[str]) -> dict[str, object]:
    agg = create_aggregate(app, "agg1")
    for host in computes:
        app.post_json("/v2.1/os-aggregates/1/action", {"add_host": {"host": host}})
    return agg


def _post(app: webtest.TestApp, terms: dict[str, Any],
          headers: dict[str, str] | None = None) -> webtest.TestResponse:
    return app.post_json(IMAGES, {"cache": [{"id": IMG1}], **terms},
                         headers=V1_1 if headers is None else headers, expect_errors=True)


def test_every_term_reaches_the_conductor_and_the_job_shows_them(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
) -> None:
    response = _post(app, ALL_TERMS)
    assert response.status_int == 202, response.text
    assert "fleetcache 1.1" in response.headers.getall("OpenStack-API-Version")
    sent = conductor.terms[0]
    assert sent == {key.removeprefix("fleetcache:"): value for key, value in ALL_TERMS.items()}
    job = app.get(response.headers["Location"], headers=V1_1).json["job"]
    assert job["terms"] == sent
    assert job["next_start_at"] is None  # queued, not scheduled


def test_instants_are_normalized_to_utc(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
) -> None:
    later = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)).replace(
        microsecond=0)
    local = later.astimezone(datetime.timezone(datetime.timedelta(hours=2)))
    response = _post(app, {"fleetcache:not_before": local.isoformat()})
    assert response.status_int == 202, response.text
    assert conductor.terms == [{"not_before": later.strftime("%Y-%m-%dT%H:%M:%SZ")}]


def test_without_terms_nothing_is_sent_and_the_job_shows_none(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
) -> None:
    response = _post(app, {}, headers=LATEST)
    assert response.status_int == 202
    assert conductor.terms == [None]
    assert "fleetcache" not in response.headers["OpenStack-API-Version"]
    job = app.get(response.headers["Location"], headers=LATEST).json["job"]
    assert job["terms"] == {} and job["next_start_at"] is None


@pytest.mark.parametrize("headers", [LATEST, {"OpenStack-API-Version":
                                              "compute 2.81, fleetcache 1.0"}])
def test_a_term_below_fleetcache_1_1_is_400_naming_the_version(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
    headers: dict[str, str],
) -> None:
    message = fault(_post(app, {"fleetcache:priority": 10}, headers), "badRequest", 400)
    assert "fleetcache:priority" in message and "fleetcache 1.1" in message
    assert conductor.calls == []


def test_a_pin_needs_no_fleetcache_version(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
) -> None:
    assert _post(app, {"fleetcache:pin_seconds": 60}, LATEST).status_int == 202
    assert _post(app, {"fleetcache:pin_seconds": 60}).status_int == 202
    assert conductor.pins == [60, 60]


WINDOW = "fleetcache:window"
BAD_TERMS = [
    # (body keys, the field the 400 names, what else it says)
    ({"fleetcache:parallelism": 0}, "fleetcache:parallelism", "minimum of 1"),
    ({"fleetcache:parallelism": 5}, "fleetcache:parallelism", "precache_concurrency"),
    ({"fleetcache:parallelism": 2**31}, "fleetcache:parallelism", "maximum"),
    ({"fleetcache:parallelism": 10**400}, "fleetcache:parallelism", "maximum"),
    ({"fleetcache:parallelism": "2"}, "fleetcache:parallelism", "integer"),
    ({"fleetcache:parallelism": 1.5}, "fleetcache:parallelism", "integer"),
    ({"fleetcache:parallelism": True}, "fleetcache:parallelism", "integer"),
    ({"fleetcache:parallelism": [1]}, "fleetcache:parallelism", "integer"),
    ({"fleetcache:origin_downloads": 3}, "fleetcache:origin_downloads",
     "max_concurrent_downloads"),
    ({"fleetcache:host_bytes_per_second": 1024}, "fleetcache:host_bytes_per_second",
     "minimum of 16384"),
    ({"fleetcache:host_bytes_per_second": 65 * 1024 * 1024},
     "fleetcache:host_bytes_per_second", "max_download_bytes_per_second"),
    ({"fleetcache:job_bytes_per_second": 100}, "fleetcache:job_bytes_per_second",
     "minimum of 16384"),
    ({"fleetcache:priority": 101}, "fleetcache:priority", "maximum of 100"),
    ({"fleetcache:priority": -1}, "fleetcache:priority", "minimum of 0"),
    ({"fleetcache:not_before": "tomorrow"}, "fleetcache:not_before", "ISO 8601"),
    ({"fleetcache:not_before": "2026-11-29T01:00:00"}, "fleetcache:not_before", "offset"),
    ({"fleetcache:not_before": "2" * 100}, "fleetcache:not_before", "at most 40"),
    ({"fleetcache:not_before": {"a": {"b": [1]}}}, "fleetcache:not_before", "string"),
    ({"fleetcache:deadline": "2000-01-01T00:00:00Z"}, "fleetcache:deadline", "past"),
    ({"fleetcache:not_before": IN_TWO_DAYS, "fleetcache:deadline": TOMORROW},
     "fleetcache:deadline", "not_before"),
    ({WINDOW: {"start": "01:00", "end": "05:00"}}, "fleetcache:window", "timezone"),
    ({WINDOW: {"start": "01:00", "end": "05:00", "timezone": "UTC", "x": 1}},
     "fleetcache:window", "Additional properties"),
    ({WINDOW: {"start": "25:00", "end": "05:00", "timezone": "UTC"}}, "fleetcache:window",
     "HH:MM"),
    ({WINDOW: {"start": "01:00", "end": "01:00", "timezone": "UTC"}}, "fleetcache:window",
     "empty"),
    ({WINDOW: {"start": "01:00", "end": "05:00", "timezone": "Mars/Olympus"}},
     "fleetcache:window", "IANA"),
    ({WINDOW: {"start": "01:00", "end": "05:00", "timezone": "Europe"}},
     "fleetcache:window", "IANA"),
    ({WINDOW: {"start": "01:00", "end": "05:00", "timezone": "../../etc/passwd"}},
     "fleetcache:window/timezone", "IANA"),
    ({WINDOW: {"start": "01:00", "end": "05:00", "timezone": "/etc/passwd"}},
     "fleetcache:window/timezone", "IANA"),
    ({WINDOW: {"start": "01:00", "end": "05:00", "timezone": "UTC\n"}},
     "fleetcache:window/timezone", "IANA"),
    ({WINDOW: {"start": "01:00", "end": "05:00", "timezone": "E" * 65}},
     "fleetcache:window/timezone", "at most 64"),
    ({WINDOW: {"start": 1, "end": "05:00", "timezone": "UTC"}},
     "fleetcache:window/start", "string"),
    ({WINDOW: "01:00-05:00"}, "fleetcache:window", "object"),
    ({WINDOW: None}, "fleetcache:window", "object"),
    ({"fleetcache:not_a_term": 1}, "", "Additional properties"),
]


@pytest.mark.parametrize(("terms", "field", "says"), BAD_TERMS)
def test_a_bad_term_is_400_naming_the_field_and_nothing_is_queued(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
    terms: dict[str, Any], field: str, says: str,
) -> None:
    message = fault(_post(app, terms), "badRequest", 400)
    assert field in message and says in message, message
    assert conductor.calls == []


def test_a_huge_time_zone_is_refused_before_it_is_read(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
) -> None:
    huge = {WINDOW: {"start": "01:00", "end": "05:00", "timezone": "E" * (10 * 1024 * 1024)}}
    response = _post(app, huge)
    assert response.status_int in (400, 413)
    assert conductor.calls == []


@pytest.mark.parametrize(("header", "status"), [
    ("compute 2.81, fleetcache 1.2", 406), ("compute 2.81, fleetcache 2.0", 406),
    ("compute 2.81, fleetcache 0.9", 400), ("compute 2.81, fleetcache 1.x", 400),
    ("compute 2.81, fleetcache " + "1" * 5000 + ".1", 400),
])
def test_a_fleetcache_version_out_of_range_is_406_and_malformed_400(
    app: webtest.TestApp, aggregate: dict[str, object], header: str, status: int,
) -> None:
    response = app.get(JOBS, headers={"OpenStack-API-Version": header}, expect_errors=True)
    assert response.status_int == status


def test_the_fleetcache_version_is_echoed_only_when_asked(
    app: webtest.TestApp, aggregate: dict[str, object],
) -> None:
    plain = app.get(JOBS, headers=LATEST)
    assert plain.headers.getall("OpenStack-API-Version") == ["compute 2.81"]
    asked = app.get(JOBS, headers={"OpenStack-API-Version": "compute 2.81, fleetcache latest"})
    assert asked.headers.getall("OpenStack-API-Version") == ["compute 2.81", "fleetcache 1.1"]
    assert asked.headers["X-OpenStack-Nova-API-Version"] == "2.81"
    # Only the fleetcache axis: compute stays at its minimum, as without a header.
    alone = app.get("/v2.1/os-aggregates", headers={"OpenStack-API-Version": "fleetcache 1.0"})
    assert alone.headers.getall("OpenStack-API-Version") == ["compute 2.1", "fleetcache 1.0"]


def test_a_scheduled_job_shows_when_it_starts(
    app: webtest.TestApp, aggregate: dict[str, object], db: Database,
) -> None:
    job = db_jobs.job_create(db, 1, str(aggregate["uuid"]), [IMG1], 3, "cond1",
                             terms={"not_before": TOMORROW})
    starts = models.utcnow() + datetime.timedelta(hours=3)
    with db.transaction() as session:
        row = session.query(models.CacheJob).filter_by(uuid=job["uuid"]).one()
        row.state, row.next_start_at = db_jobs.SCHEDULED, starts
    shown = app.get(f"{JOBS}/{job['uuid']}", headers=LATEST).json["job"]
    assert shown["state"] == "scheduled"
    assert shown["terms"] == {"not_before": TOMORROW}
    assert shown["next_start_at"] == starts.strftime("%Y-%m-%dT%H:%M:%S.%f")
    (listed,) = app.get(JOBS, headers=LATEST).json["jobs"]
    assert listed["next_start_at"] == shown["next_start_at"]


@pytest.mark.parametrize("terms", [
    {"fleetcache:deadline": "9999-12-31T23:59:59-05:00"},
    {"fleetcache:not_before": "0001-01-01T00:00:00+01:00"},
])
def test_an_instant_near_the_ends_of_time_is_a_400(app, aggregate, terms):
    assert _post(app, terms).status_int == 400
