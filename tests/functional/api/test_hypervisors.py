"""GET /os-hypervisors[/detail]: the computes as Nova's hypervisors, from their service and
the Placement inventory they reported, with what their servers use."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
import webtest
from sqlalchemy import update

from fleetcache.common import instance_states
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db import models
from fleetcache.common.db import services as db_services
from fleetcache.common.db.instances import InstanceCreate
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import LATEST, MEMBER, fault

HYPERVISORS = "/v2.1/os-hypervisors"
INVENTORY = {
    "VCPU": {"total": 8, "reserved": 0, "allocation_ratio": 16.0},
    "MEMORY_MB": {"total": 16384, "reserved": 512, "allocation_ratio": 1.5},
    "DISK_GB": {"total": 100, "reserved": 0, "allocation_ratio": 1.0},
}
FLAVOR = {"flavorid": "m1", "name": "m1", "vcpus": 2, "memory_mb": 1024, "root_gb": 10,
          "ephemeral_gb": 1, "swap": 0, "extra_specs": {}}


@pytest.fixture
def computes(db: Database) -> list[str]:
    """c1 with an inventory and two servers, c2 disabled without one, c3 silent (down)."""
    for host in ("c1", "c2", "c3"):
        capabilities = {"inventory": INVENTORY} if host == "c1" else {}
        db_services.service_register(db, host, "fleetcache-compute", "compute", None,
                                     capabilities=capabilities)
    db_services.service_register(db, "ctl", "fleetcache-conductor", "conductor", None)
    c2 = db_services.service_get(db, "c2", "fleetcache-compute")
    db_services.service_update(db, c2["id"], disabled=True, disabled_reason="maintenance")
    old = models.utcnow() - datetime.timedelta(hours=1)
    with db.transaction() as session:
        session.execute(update(models.Service).where(models.Service.host == "c3")
                        .values(last_seen_up=old))
    records = [InstanceCreate(uuid=f"00000000-0000-0000-0000-00000000000{n}", project_id="p1",
                              user_id="u1", display_name=f"vm{n}", image_ref="img",
                              flavor=FLAVOR, reservation_id="r-1", launch_index=n,
                              availability_zone=None, requested_host=None)
               for n in (1, 2)]
    for instance in db_instances.instances_create(db, records):
        db_instances.instance_update(db, instance["uuid"], {
            "host": "c1", "node": "c1", "vm_state": instance_states.ACTIVE,
            "task_state": None})
    return ["c1", "c2", "c3"]


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
