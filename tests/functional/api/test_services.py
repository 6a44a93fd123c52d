"""GET /os-services: state from heartbeats, status, zone, filters, microversion fields."""

from __future__ import annotations

import datetime

import webtest
from oslo_config import cfg
from sqlalchemy import update

from fleetcache.common.db import models
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import LATEST, MEMBER, create_aggregate, fault

SERVICES = "/v2.1/os-services"


def _age(db: Database, host: str, seconds: int) -> None:
    old = models.utcnow() - datetime.timedelta(seconds=seconds)
    with db.transaction() as session:
        session.execute(
            update(models.Service).where(models.Service.host == host).values(last_seen_up=old)
        )


def test_list_shows_state_status_and_zone(
    app: webtest.TestApp, db: Database, computes: list[str], conf: cfg.ConfigOpts
) -> None:
    db_services.service_register(db, "ctl", "fleetcache-conductor", "conductor", None)
    create_aggregate(app, "a", availability_zone="az1")
    app.post_json("/v2.1/os-aggregates/1/action", {"add_host": {"host": "c1"}})
    _age(db, "c2", conf.service_down_time + 5)
    svc = db_services.service_get(db, "c3", "fleetcache-compute")
    db_services.service_update(db, svc["id"], disabled=True, disabled_reason="maintenance")
    db_services.service_placement_synced(db, "c1", "fleetcache-compute", {})

    services = {s["host"]: s for s in app.get(SERVICES).json["services"]}
    assert services["c1"] == {
        "id": services["c1"]["id"], "binary": "nova-compute", "host": "c1",
        "zone": "az1", "status": "enabled", "state": "up",
        "updated_at": services["c1"]["updated_at"], "disabled_reason": None,
    }
    assert isinstance(services["c1"]["id"], int)
    assert services["c2"]["state"] == "down" and services["c2"]["zone"] == "nova"
    assert services["c2"]["status"] == "enabled"
    assert services["c2"]["disabled_reason"] == "not schedulable: not yet reported to Placement"
    assert services["c3"]["status"] == "disabled"
    assert services["c3"]["disabled_reason"] == "maintenance"
    assert services["ctl"]["zone"] == "internal"
    assert services["ctl"]["disabled_reason"] is None


def test_filters(app: webtest.TestApp, db: Database, computes: list[str]) -> None:
    db_services.service_register(db, "c1", "fleetcache-conductor", "conductor", None)
    hosts = app.get(SERVICES, {"host": "c1"}).json["services"]
    assert sorted(s["binary"] for s in hosts) == ["nova-compute", "nova-conductor"]
    binaries = app.get(SERVICES, {"binary": "nova-conductor"}).json["services"]
    assert [s["host"] for s in binaries] == ["c1"]
    both = app.get(SERVICES, {"binary": "nova-compute", "host": "c2"}).json["services"]
    assert [s["host"] for s in both] == ["c2"]
    assert app.get(SERVICES, {"binary": "nova-scheduler"}).json["services"] == []


def test_services_show_novas_binary_names_and_take_fleetcaches_too(
    app: webtest.TestApp, db: Database, computes: list[str]
) -> None:
    """The API presents each service under Nova's name of its part; fleetcache's own name
    (what fleetcache-manage and the logs show) still finds it."""
    db_services.service_register(db, "ctl", "fleetcache-conductor", "conductor", None)
    shown = {s["host"]: s["binary"] for s in app.get(SERVICES).json["services"]}
    assert shown == {"c1": "nova-compute", "c2": "nova-compute", "c3": "nova-compute",
                     "ctl": "nova-conductor"}
    ours = app.get(SERVICES, {"binary": "fleetcache-compute"}).json["services"]
    assert sorted(s["host"] for s in ours) == computes
    assert {s["binary"] for s in ours} == {"nova-compute"}
    conductors = app.get(SERVICES, {"binary": "fleetcache-conductor"}).json["services"]
    assert [(s["host"], s["binary"]) for s in conductors] == [("ctl", "nova-conductor")]


def test_forced_down_and_uuid_ids_at_newer_microversions(
    app: webtest.TestApp, db: Database, computes: list[str]
) -> None:
    svc = db_services.service_get(db, "c1", "fleetcache-compute")
    db_services.service_update(db, svc["id"], forced_down=True)
    at_211 = app.get(SERVICES, {"host": "c1"}, headers={"OpenStack-API-Version": "compute 2.11"})
    first = at_211.json["services"][0]
    assert first["forced_down"] is True and first["state"] == "down" and first["id"] == svc["id"]
    latest = app.get(SERVICES, {"host": "c1"}, headers=LATEST).json["services"][0]
    assert latest["id"] == svc["uuid"]


def test_member_is_forbidden(app: webtest.TestApp) -> None:
    fault(app.get(SERVICES, headers=MEMBER, expect_errors=True), "forbidden", 403)
