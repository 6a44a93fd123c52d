"""GET /os-hypervisors[/detail]: the computes as Nova's hypervisors, from their service and
the Placement inventory they reported, with what their servers use."""

from __future__ import annotations

from typing import Any

import pytest
import webtest

from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import LATEST, MEMBER, fault
from tests.functional.api.hypervisor_hosts import hypervisor_hosts

HYPERVISORS = "/v2.1/os-hypervisors"


@pytest.fixture
def computes(db: Database) -> list[str]:
    return hypervisor_hosts(db)


def _by_host(app: webtest.TestApp, path: str, **kw: Any) -> dict[str, dict[str, Any]]:
    return {h["hypervisor_hostname"]: h for h in app.get(path, **kw).json["hypervisors"]}


def test_list_shows_each_compute_with_state_and_status(app: webtest.TestApp, db: Database,
                                                       computes: list[str]) -> None:
    listed = _by_host(app, HYPERVISORS)
    assert sorted(listed) == computes  # the conductor is no hypervisor
    c1 = db_services.service_get(db, "c1", "fleetcache-compute")
    assert listed["c1"] == {"id": c1["id"], "hypervisor_hostname": "c1", "state": "up",
                            "status": "enabled"}
    assert listed["c2"]["status"] == "disabled" and listed["c3"]["state"] == "down"
    assert _by_host(app, HYPERVISORS, headers=LATEST)["c1"]["id"] == c1["uuid"]


def test_detail_shows_the_reported_inventory_and_what_servers_use(
        app: webtest.TestApp, db: Database, computes: list[str]) -> None:
    detail = _by_host(app, HYPERVISORS + "/detail")
    c1 = detail["c1"]
    service = db_services.service_get(db, "c1", "fleetcache-compute")
    assert c1["service"] == {"id": service["id"], "host": "c1", "disabled_reason": None}
    assert (c1["vcpus"], c1["memory_mb"], c1["local_gb"]) == (8, 16384, 100)
    assert (c1["vcpus_used"], c1["memory_mb_used"], c1["local_gb_used"]) == (4, 2048, 22)
    assert c1["free_ram_mb"] == 14336 and c1["free_disk_gb"] == 78
    assert c1["running_vms"] == 2 and c1["current_workload"] == 0
    assert c1["hypervisor_type"] == "fleetcache" and c1["cpu_info"] == "{}"
    assert detail["c2"]["service"]["disabled_reason"] == "maintenance"
    assert detail["c2"]["vcpus"] == 0 and detail["c2"]["running_vms"] == 0
    latest = _by_host(app, HYPERVISORS + "/detail", headers=LATEST)["c1"]
    assert latest["cpu_info"] == {} and latest["service"]["id"] == service["uuid"]


def test_pattern_and_servers_from_2_53(app: webtest.TestApp, computes: list[str]) -> None:
    found = app.get(HYPERVISORS, {"hypervisor_hostname_pattern": "1", "with_servers": "true"},
                    headers=LATEST).json["hypervisors"]
    assert [h["hypervisor_hostname"] for h in found] == ["c1"]
    assert sorted(s["name"] for s in found[0]["servers"]) == ["vm1", "vm2"]
    fault(app.get(HYPERVISORS, {"hypervisor_hostname_pattern": "zz"}, headers=LATEST,
                  expect_errors=True), "itemNotFound", 404)
    fault(app.get(HYPERVISORS, {"hypervisor_hostname_pattern": "c", "limit": "1"},
                  headers=LATEST, expect_errors=True), "badRequest", 400)
    fault(app.get(HYPERVISORS, {"with_servers": "perhaps"}, headers=LATEST,
                  expect_errors=True), "badRequest", 400)


def test_limit_and_marker(app: webtest.TestApp, computes: list[str]) -> None:
    first = app.get(HYPERVISORS, {"limit": "2"}, headers=LATEST).json
    assert [h["hypervisor_hostname"] for h in first["hypervisors"]] == ["c1", "c2"]
    marker = first["hypervisors"][1]["id"]
    assert f"marker={marker}" in first["hypervisors_links"][0]["href"]
    rest = app.get(HYPERVISORS, {"marker": marker}, headers=LATEST).json["hypervisors"]
    assert [h["hypervisor_hostname"] for h in rest] == ["c3"]
    fault(app.get(HYPERVISORS, {"marker": "nope"}, headers=LATEST, expect_errors=True),
          "badRequest", 400)


def test_member_is_forbidden(app: webtest.TestApp, computes: list[str]) -> None:
    for path in (HYPERVISORS, HYPERVISORS + "/detail"):
        fault(app.get(path, headers=MEMBER, expect_errors=True), "forbidden", 403)
