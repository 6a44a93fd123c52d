"""GET /os-hypervisors/{id}, /statistics, /{id}/uptime, /{pattern}/search and
/{pattern}/servers: Nova's routes at Nova's microversions, shaped as Nova's schemas say
(nova/api/openstack/compute/schemas/hypervisors.py), admins only."""

from __future__ import annotations

from typing import Any

import oslo_messaging as messaging
import pytest
import webtest

from fleetcache.common import exception
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import LATEST, MEMBER, StubComputeAPI, fault
from tests.functional.api.hypervisor_hosts import hypervisor_hosts

HYPERVISORS = "/v2.1/os-hypervisors"
V2_1: dict[str, str] = {}
V2_52 = {"OpenStack-API-Version": "compute 2.52"}
V2_53 = {"OpenStack-API-Version": "compute 2.53"}
#: The fields of Nova's hypervisor (index) and of its detail below 2.88.
SUMMARY = {"id", "hypervisor_hostname", "state", "status"}
DETAIL = SUMMARY | {
    "cpu_info", "current_workload", "disk_available_least", "free_disk_gb", "free_ram_mb",
    "host_ip", "hypervisor_type", "hypervisor_version", "local_gb", "local_gb_used",
    "memory_mb", "memory_mb_used", "running_vms", "service", "vcpus", "vcpus_used"}
STATISTICS = {"count", "current_workload", "disk_available_least", "free_disk_gb",
              "free_ram_mb", "local_gb", "local_gb_used", "memory_mb", "memory_mb_used",
              "running_vms", "vcpus", "vcpus_used"}


@pytest.fixture
def computes(db: Database) -> list[str]:
    """c1 with an inventory and two servers, c2 disabled, c3 down."""
    return hypervisor_hosts(db)


def _service(db: Database, host: str) -> dict[str, Any]:
    return dict(db_services.service_get(db, host, "fleetcache-compute"))


def test_detail_and_show_answer_the_address_the_compute_registered_with(
        app: webtest.TestApp, db: Database, computes: list[str]) -> None:
    c1 = _service(db, "c1")
    db_services.service_register(db, "c1", "fleetcache-compute", "compute", None,
                                 capabilities=c1["capabilities"], host_ip="192.0.2.11")
    detail = {h["hypervisor_hostname"]: h
              for h in app.get(HYPERVISORS + "/detail").json["hypervisors"]}
    assert detail["c1"]["host_ip"] == "192.0.2.11"
    assert detail["c2"]["host_ip"] is None  # registered without one
    shown = app.get(f"{HYPERVISORS}/{c1['id']}").json["hypervisor"]
    assert shown["host_ip"] == "192.0.2.11"


def test_show_is_novas_detail_by_integer_id_then_by_uuid(
        app: webtest.TestApp, db: Database, computes: list[str]) -> None:
    c1 = _service(db, "c1")
    old = app.get(f"{HYPERVISORS}/{c1['id']}", headers=V2_1).json["hypervisor"]
    assert set(old) == DETAIL
    assert old["id"] == c1["id"] and old["service"]["id"] == c1["id"]
    assert old["cpu_info"] == "{}" and old["running_vms"] == 2 and old["vcpus"] == 8
    new = app.get(f"{HYPERVISORS}/{c1['uuid']}", headers=LATEST).json["hypervisor"]
    assert set(new) == DETAIL and new["id"] == c1["uuid"] and new["cpu_info"] == {}
    assert new["service"] == {"id": c1["uuid"], "host": "c1", "disabled_reason": None}


@pytest.mark.parametrize(("headers", "ident", "status"), [
    (V2_1, "uuid", 404), (V2_52, "nope", 404), (V2_1, "0", 404),
    (V2_53, "id", 400), (LATEST, "nope", 400),
    (LATEST, "6f9619ff-8b86-d011-b42d-00c04fc964ff", 404), (V2_1, "99999", 404),
])
def test_show_refuses_ids_as_nova_does(app: webtest.TestApp, db: Database, computes: list[str],
                                       headers: dict[str, str], ident: str,
                                       status: int) -> None:
    c1 = _service(db, "c1")
    value = {"uuid": c1["uuid"], "id": str(c1["id"])}.get(ident, ident)
    for path in (f"{HYPERVISORS}/{value}", f"{HYPERVISORS}/{value}/uptime"):
        fault(app.get(path, headers=headers, expect_errors=True),
              "itemNotFound" if status == 404 else "badRequest", status)


def test_show_with_servers_from_2_53_and_always_the_list_from_2_75(
        app: webtest.TestApp, db: Database, computes: list[str]) -> None:
    c1, c2 = _service(db, "c1"), _service(db, "c2")
    shown = app.get(f"{HYPERVISORS}/{c1['uuid']}", {"with_servers": "1"},
                    headers=V2_53).json["hypervisor"]
    assert sorted(s["name"] for s in shown["servers"]) == ["vm1", "vm2"]
    empty = {"OpenStack-API-Version": "compute 2.74"}
    assert "servers" not in app.get(f"{HYPERVISORS}/{c2['uuid']}", {"with_servers": "true"},
                                    headers=empty).json["hypervisor"]
    assert app.get(f"{HYPERVISORS}/{c2['uuid']}", {"with_servers": "true"},
                   headers=LATEST).json["hypervisor"]["servers"] == []
    assert "servers" not in app.get(f"{HYPERVISORS}/{c1['uuid']}",
                                    headers=LATEST).json["hypervisor"]


def test_query_parameters_are_novas_from_2_53(app: webtest.TestApp, db: Database,
                                             computes: list[str]) -> None:
    c1 = _service(db, "c1")
    # Below 2.53 anything is ignored, from 2.53 only Nova's parameters, each once.
    assert app.get(f"{HYPERVISORS}/{c1['id']}", {"foo": "1"}, headers=V2_1).status_int == 200
    assert app.get(HYPERVISORS, {"foo": "1"}, headers=V2_52).status_int == 200
    for path, query in ((f"{HYPERVISORS}/{c1['uuid']}", "foo=1"),
                        (f"{HYPERVISORS}/{c1['uuid']}", "limit=1"),
                        (HYPERVISORS, "foo=1"), (HYPERVISORS + "/detail", "sort_key=id"),
                        (HYPERVISORS, "with_servers=1&with_servers=0"),
                        (HYPERVISORS, "hypervisor_hostname_pattern=c%25"),
                        (HYPERVISORS, "limit=-1")):
        message = fault(app.get(f"{path}?{query}", headers=LATEST, expect_errors=True),
                        "badRequest", 400)
        assert "query parameter" in message


def test_statistics_add_up_the_enabled_hypervisors(app: webtest.TestApp,
                                                   computes: list[str]) -> None:
    stats = app.get(HYPERVISORS + "/statistics", headers=LATEST).json["hypervisor_statistics"]
    assert set(stats) == STATISTICS
    # c2 is disabled; c1 has the inventory and both servers, c3 reported nothing.
    assert stats["count"] == 2
    assert (stats["vcpus"], stats["memory_mb"], stats["local_gb"]) == (8, 16384, 100)
    assert (stats["vcpus_used"], stats["running_vms"], stats["free_disk_gb"]) == (4, 2, 78)


def test_uptime_is_asked_of_the_compute(app: webtest.TestApp, db: Database,
                                        computes: list[str],
                                        compute_api: StubComputeAPI) -> None:
    c1 = _service(db, "c1")
    body = app.get(f"{HYPERVISORS}/{c1['id']}/uptime").json["hypervisor"]
    assert set(body) == SUMMARY | {"uptime"}
    assert body["uptime"] == compute_api.uptime and body["id"] == c1["id"]
    latest = app.get(f"{HYPERVISORS}/{c1['uuid']}/uptime", headers=LATEST).json["hypervisor"]
    assert latest["id"] == c1["uuid"]
    assert compute_api.asked == ["c1", "c1"]


def test_uptime_of_a_down_compute_is_400_without_asking(
        app: webtest.TestApp, db: Database, computes: list[str],
        compute_api: StubComputeAPI) -> None:
    message = fault(app.get(f"{HYPERVISORS}/{_service(db, 'c3')['id']}/uptime",
                            expect_errors=True), "badRequest", 400)
    assert message == "Compute service of c3 is unavailable at this time."
    assert compute_api.asked == []


@pytest.mark.parametrize(("error", "key", "status"), [
    (messaging.MessagingTimeout("no reply"), "badRequest", 400),
    (messaging.MessageDeliveryFailure("gone"), "badRequest", 400),
    (NotImplementedError("no boot time"), "notImplemented", 501),
    (messaging.UnsupportedVersion("1.3"), "notImplemented", 501),
    (exception.RPCVersionCapped(topic="compute", cap="1.2", method="get_host_uptime",
                                version="1.3"), "notImplemented", 501),
])
def test_uptime_a_compute_cannot_give_is_novas_error(
        app: webtest.TestApp, db: Database, computes: list[str],
        compute_api: StubComputeAPI, error: BaseException, key: str, status: int) -> None:
    compute_api.error = error
    fault(app.get(f"{HYPERVISORS}/{_service(db, 'c1')['id']}/uptime", expect_errors=True),
          key, status)


def test_search_and_servers_routes_below_2_53(app: webtest.TestApp,
                                              computes: list[str]) -> None:
    found = app.get(HYPERVISORS + "/c/search", headers=V2_52).json["hypervisors"]
    assert [h["hypervisor_hostname"] for h in found] == ["c1", "c2", "c3"]
    assert all(set(h) == SUMMARY for h in found)
    hosts = {h["hypervisor_hostname"]: h
             for h in app.get(HYPERVISORS + "/c/servers").json["hypervisors"]}
    assert sorted(s["name"] for s in hosts["c1"]["servers"]) == ["vm1", "vm2"]
    assert set(hosts["c2"]) == SUMMARY  # no servers: no list, as Nova below 2.75
    for route in ("search", "servers"):
        fault(app.get(f"{HYPERVISORS}/zz/{route}", expect_errors=True), "itemNotFound", 404)
        # From 2.53 the list's query parameters replace them.
        fault(app.get(f"{HYPERVISORS}/c/{route}", headers=V2_53, expect_errors=True),
              "itemNotFound", 404)


def test_member_is_forbidden_everywhere(app: webtest.TestApp, db: Database,
                                        computes: list[str],
                                        compute_api: StubComputeAPI) -> None:
    c1 = _service(db, "c1")
    for path in (f"{HYPERVISORS}/{c1['id']}", f"{HYPERVISORS}/{c1['id']}/uptime",
                 HYPERVISORS + "/statistics", HYPERVISORS + "/c1/search",
                 HYPERVISORS + "/c1/servers", HYPERVISORS + "/nope/servers"):
        fault(app.get(path, headers=MEMBER, expect_errors=True), "forbidden", 403)
    assert compute_api.asked == []
