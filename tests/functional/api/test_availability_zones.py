"""GET /os-availability-zone[/detail]: the zones of the services, as Nova's; and Nova's
empty GET /extensions."""

from __future__ import annotations

import webtest

from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import MEMBER, create_aggregate, fault

ZONES = "/v2.1/os-availability-zone"


def _setup(app: webtest.TestApp, db: Database) -> None:
    """c1 in az1 (through an aggregate), c2 in the default zone, c3 alone in az3 and
    disabled, an empty aggregate in az-empty, a conductor in the internal zone."""
    for host in ("c1", "c2", "c3"):
        db_services.service_register(db, host, "fleetcache-compute", "compute", None)
    db_services.service_register(db, "ctl", "fleetcache-conductor", "conductor", None)
    for name, zone, host in (("a1", "az1", "c1"), ("a3", "az3", "c3"),
                             ("empty", "az-empty", None)):
        agg = create_aggregate(app, name, availability_zone=zone)
        if host:
            app.post_json(f"/v2.1/os-aggregates/{agg['id']}/action",
                          {"add_host": {"host": host}})
    c3 = db_services.service_get(db, "c3", "fleetcache-compute")
    db_services.service_update(db, c3["id"], disabled=True)


def test_list_is_novas_for_anyone(app: webtest.TestApp, db: Database) -> None:
    _setup(app, db)
    info = app.get(ZONES, headers=MEMBER).json["availabilityZoneInfo"]
    assert info == [
        {"zoneName": "az1", "zoneState": {"available": True}, "hosts": None},
        {"zoneName": "nova", "zoneState": {"available": True}, "hosts": None},
        {"zoneName": "az3", "zoneState": {"available": False}, "hosts": None},
    ]


def test_detail_lists_every_zone_with_its_services(app: webtest.TestApp, db: Database) -> None:
    _setup(app, db)
    info = {z["zoneName"]: z for z in app.get(ZONES + "/detail").json["availabilityZoneInfo"]}
    assert sorted(info) == ["az1", "az3", "internal", "nova"]
    c1 = info["az1"]["hosts"]["c1"]["nova-compute"]  # Nova's name of the part

    assert c1["available"] is True and c1["active"] is True and c1["updated_at"]
    assert list(info["internal"]["hosts"]) == ["ctl"]
    assert list(info["internal"]["hosts"]["ctl"]) == ["nova-conductor"]
    assert info["az3"] == {"zoneName": "az3", "zoneState": {"available": False},
                           "hosts": None}
    fault(app.get(ZONES + "/detail", headers=MEMBER, expect_errors=True), "forbidden", 403)


def test_extensions_are_an_empty_list(app: webtest.TestApp) -> None:
    assert app.get("/v2.1/extensions", headers=MEMBER).json == {"extensions": []}
    fault(app.get("/v2.1/extensions/os-hypervisors", headers=MEMBER, expect_errors=True),
          "itemNotFound", 404)
