"""The pin extension of POST /os-aggregates/{id}/images (``"fleetcache:pin_seconds"``) and
the ``waiting`` state of the jobs resource."""

from __future__ import annotations

import datetime

import pytest
import webtest

from fleetcache.common.db import jobs as db_jobs
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import LATEST, StubConductorAPI, create_aggregate, fault

IMG1 = "11111111-1111-1111-1111-111111111111"
IMAGES = "/v2.1/os-aggregates/1/images"
JOBS = IMAGES + "/jobs"
PIN = "fleetcache:pin_seconds"


@pytest.fixture
def aggregate(app: webtest.TestApp, computes: list[str]) -> dict[str, object]:
    agg = create_aggregate(app, "agg1")
    for host in computes:
        app.post_json("/v2.1/os-aggregates/1/action", {"add_host": {"host": host}})
    return agg


def test_a_pin_reaches_the_conductor_and_the_job_shows_until_when(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
    db: Database,
) -> None:
    response = app.post_json(IMAGES, {"cache": [{"id": IMG1}], PIN: 3600}, headers=LATEST)
    assert response.status_int == 202
    assert conductor.pins == [3600]
    job = app.get(response.headers["Location"], headers=LATEST).json["job"]
    until = datetime.datetime.fromisoformat(job["pin_until"])
    assert datetime.timedelta(seconds=3590) < until - datetime.datetime.fromisoformat(
        job["created_at"]) < datetime.timedelta(seconds=3610)


def test_without_a_pin_nothing_is_pinned(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
) -> None:
    response = app.post_json(IMAGES, {"cache": [{"id": IMG1}]}, headers=LATEST)
    assert conductor.pins == [None]
    assert app.get(response.headers["Location"], headers=LATEST).json["job"]["pin_until"] is None


@pytest.mark.parametrize("pin", [0, -5, 1.5, "60", None, True, 366 * 24 * 3600 + 1])
def test_a_bad_pin_is_400_and_nothing_is_queued(
    app: webtest.TestApp, aggregate: dict[str, object], conductor: StubConductorAPI,
    pin: object,
) -> None:
    response = app.post_json(IMAGES, {"cache": [{"id": IMG1}], PIN: pin}, headers=LATEST,
                             expect_errors=True)
    fault(response, "badRequest", 400)
    assert conductor.calls == []


def test_a_waiting_host_counts_as_waiting_not_as_reported(
    app: webtest.TestApp, aggregate: dict[str, object], db: Database,
) -> None:
    job = db_jobs.job_create(db, 1, str(aggregate["uuid"]), [IMG1], 2, "cond1")
    db_jobs.job_record_hosts(db, job["uuid"], {
        "c1": {IMG1: db_jobs.ResultFields(state="cached", reason=None, bytes_downloaded=5)},
        "c2": {IMG1: db_jobs.ResultFields(state=db_jobs.WAITING, bytes_downloaded=0,
                                          reason="2 hosts downloading this image")}})
    shown = app.get(f"{JOBS}/{job['uuid']}", headers=LATEST).json["job"]
    assert shown["hosts_reported"] == 1
    assert shown["counts"]["waiting"] == 1 and shown["counts"]["cached"] == 1
    (waiting,) = [h for h in shown["hosts"] if h["host"] == "c2"]
    assert waiting["images"][0]["state"] == "waiting"
