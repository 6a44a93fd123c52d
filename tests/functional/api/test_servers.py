"""/servers: create, list, show, delete and rebuild, shaped as Nova's, against a stub
conductor (the real build flow is tested in tests/unit/conductor/test_build.py)."""

from __future__ import annotations

import io
import json
import pathlib
from typing import Any

import oslo_messaging as messaging
import pytest
import webtest
from oslo_config import cfg

from fleetcache.api.handlers import server_filters
from fleetcache.common import instance_states
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db.session import Database
from fleetcache.image import local
from tests.functional.api.helpers import (
    LATEST,
    PROJECT_ADMIN,
    PROJECT_USER,
    StubConductorAPI,
    fault,
)

SERVERS = "/v2.1/servers"
USER = {**PROJECT_USER, **LATEST}
ADMIN = {**PROJECT_ADMIN, **LATEST}
OTHER = {**USER, "X-Project-Id": "p2"}


@pytest.fixture
def images(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> dict[str, str]:
    directory = tmp_path / "images"
    directory.mkdir()
    conf.set_override("backend", "local", group="image_source")
    conf.set_override("local_directory", str(directory), group="image_source")
    found = {}
    for name, status, size in (("raw", "active", 10), ("queued", "queued", 10),
                               ("big", "active", 3 * 1024**3)):
        meta = local.add_image(str(directory), io.BytesIO(b"x" * 10), name=name, status=status,
                               disk_format="raw")
        if size != 10:
            meta_file = directory / f"{meta.id}.json"
            meta_file.write_text(meta_file.read_text().replace('"size": 10', f'"size": {size}'))
        found[name] = meta.id
    return found


@pytest.fixture
def flavor(app: webtest.TestApp) -> str:
    body = {"flavor": {"name": "m1", "id": "m1", "ram": 512, "vcpus": 1, "disk": 1}}
    app.post_json("/v2.1/flavors", body)
    app.post_json("/v2.1/flavors/m1/os-extra_specs", {"extra_specs": {"k": "v"}})
    return "m1"


def _create(app: webtest.TestApp, images: dict[str, str], headers: Any = USER,
            status: int = 202, **extra: Any) -> webtest.TestResponse:
    body = {"server": {"name": "vm", "imageRef": images["raw"], "flavorRef": "m1",
                       "networks": "none", **extra}}
    return app.post_json(SERVERS, body, headers=headers, status=status)


def test_create_records_build_and_casts(app: webtest.TestApp, images: dict[str, str],
                                        flavor: str, conductor: StubConductorAPI,
                                        db: Database) -> None:
    server = _create(app, images).json["server"]
    assert set(server) == {"id", "links", "OS-DCF:diskConfig", "adminPass"}
    assert server["OS-DCF:diskConfig"] == "MANUAL" and len(server["adminPass"]) >= 12
    assert conductor.boot_calls == [("build_instances", ([server["id"]], 1))]
    shown = app.get(f"{SERVERS}/{server['id']}", headers=USER).json["server"]
    assert shown["status"] == "BUILD" and shown["OS-EXT-STS:task_state"] == "scheduling"
    assert shown["tenant_id"] == "p1" and shown["user_id"] == "u1"
    assert shown["image"]["id"] == images["raw"]
    assert shown["flavor"] == {"vcpus": 1, "ram": 512, "disk": 1, "ephemeral": 0, "swap": 0,
                               "original_name": "m1", "extra_specs": {"k": "v"}}
    assert "OS-EXT-SRV-ATTR:host" not in shown  # members do not see hosts
    record = db_instances.instance_get(db, server["id"])
    assert record["flavor"]["flavorid"] == "m1" and record["availability_zone"] is None


def test_flavor_by_id_and_links_below_2_47(app: webtest.TestApp, images: dict[str, str],
                                          flavor: str) -> None:
    server = _create(app, images).json["server"]
    old = app.get(f"{SERVERS}/{server['id']}", headers=PROJECT_USER).json["server"]
    assert old["flavor"]["id"] == "m1" and old["flavor"]["links"]


def test_what_the_owner_says_is_kept_and_shown_as_nova(
    app: webtest.TestApp, images: dict[str, str], flavor: str, db: Database
) -> None:
    extra = {"metadata": {"role": "web", "a b:c.d-e_f": ""}, "accessIPv4": "192.0.2.7",
             "accessIPv6": "0000:0000:0000:0000:0000:babe:220.12.22.2", "adminPass": "s3cret",
             "OS-DCF:diskConfig": "AUTO", "description": "the web one"}
    server = _create(app, images, **extra).json["server"]
    assert server["adminPass"] == "s3cret" and server["OS-DCF:diskConfig"] == "AUTO"
    shown = app.get(f"{SERVERS}/{server['id']}", headers=USER).json["server"]
    # The IPv6 address in canonical form (RFC 5952), as Nova stores it (Tempest compares so).
    assert (shown["accessIPv4"], shown["accessIPv6"]) == ("192.0.2.7", "::babe:dc0c:1602")
    assert shown["metadata"] == extra["metadata"] and shown["OS-DCF:diskConfig"] == "AUTO"
    assert shown["description"] == "the web one"
    (listed,) = app.get(f"{SERVERS}/detail", headers=USER).json["servers"]
    assert {k: listed[k] for k in ("accessIPv4", "accessIPv6", "metadata", "description")} == {
        k: shown[k] for k in ("accessIPv4", "accessIPv6", "metadata", "description")}
    record = db_instances.instance_get(db, server["id"])
    assert record["metadata"] == extra["metadata"] and record["auto_disk_config"] is True
    assert _create(app, images, adminPass="").json["server"]["adminPass"] == ""


def test_a_server_without_them_shows_novas_defaults(
    app: webtest.TestApp, images: dict[str, str], flavor: str
) -> None:
    server = _create(app, images).json["server"]
    shown = app.get(f"{SERVERS}/{server['id']}", headers=USER).json["server"]
    assert (shown["accessIPv4"], shown["accessIPv6"], shown["metadata"]) == ("", "", {})
    assert shown["OS-DCF:diskConfig"] == "MANUAL" and shown["description"] is None


@pytest.mark.parametrize(("prop", "asked", "shown"), [
    ("True", None, "AUTO"), ("False", None, "MANUAL"), ("disabled", None, "MANUAL"),
    ("disabled", "MANUAL", "MANUAL"), ("True", "MANUAL", "MANUAL"),
])
def test_disk_config_follows_the_image_when_not_asked(
        app: webtest.TestApp, images: dict[str, str], flavor: str, conf: cfg.ConfigOpts,
        prop: str, asked: str | None, shown: str) -> None:
    _set_image_fields(conf, images["raw"], auto_disk_config=prop)
    extra = {} if asked is None else {"OS-DCF:diskConfig": asked}
    server = _create(app, images, **extra).json["server"]
    assert server["OS-DCF:diskConfig"] == shown
    assert app.get(f"{SERVERS}/{server['id']}", headers=USER).json["server"][
        "OS-DCF:diskConfig"] == shown


def test_auto_disk_config_on_an_image_that_disables_it_is_400(
        app: webtest.TestApp, images: dict[str, str], flavor: str, conf: cfg.ConfigOpts,
        conductor: StubConductorAPI) -> None:
    _set_image_fields(conf, images["raw"], auto_disk_config="Disabled")
    message = fault(_create(app, images, status=400, **{"OS-DCF:diskConfig": "AUTO"}),
                    "badRequest", 400)
    assert "has automatic disk resize disabled" in message
    assert conductor.boot_calls == []


@pytest.mark.parametrize("bad", [
    {"metadata": {"bad/key": "v"}}, {"metadata": {"k": 1}}, {"metadata": {"k": "v" * 256}},
    {"metadata": []}, {"accessIPv4": "2001:db8::7"}, {"accessIPv4": "300.1.1.1"},
    {"accessIPv6": "192.0.2.7"}, {"accessIPv6": "fe80::1%eth0"}, {"accessIPv4": "1.2.3.4\n"},
    {"adminPass": 1}, {"OS-DCF:diskConfig": "auto"}, {"description": "d" * 256},
    {"description": "a\u0000b"}, {"description": 1},
])
def test_bad_boot_fields_are_400(app: webtest.TestApp, images: dict[str, str], flavor: str,
                                 bad: dict[str, Any]) -> None:
    fault(_create(app, images, status=400, **bad), "badRequest", 400)


def test_metadata_over_the_quota_is_403(app: webtest.TestApp, images: dict[str, str],
                                        flavor: str, conductor: StubConductorAPI) -> None:
    metadata = {f"k{n}": "v" for n in range(129)}
    fault(_create(app, images, status=403, metadata=metadata), "forbidden", 403)
    assert conductor.boot_calls == []
    assert _create(app, images, metadata=dict(list(metadata.items())[:128])).status_int == 202


@pytest.mark.parametrize(("version", "has_description"),
                         [("2.18", False), ("2.19", True), ("2.47", True)])
def test_description_shown_from_2_19(app: webtest.TestApp, images: dict[str, str],
                                     flavor: str, version: str, has_description: bool) -> None:
    server = _create(app, images, description="d1").json["server"]
    headers = {**PROJECT_USER, "OpenStack-API-Version": f"compute {version}"}
    shown = app.get(f"{SERVERS}/{server['id']}", headers=headers).json["server"]
    assert shown.get("description", "absent") == ("d1" if has_description else "absent")
    (listed,) = app.get(f"{SERVERS}/detail", headers=headers).json["servers"]
    assert ("description" in listed) is has_description


def test_below_2_19_the_description_is_the_name_as_nova_stores_it(
        app: webtest.TestApp, images: dict[str, str], flavor: str) -> None:
    old = {**PROJECT_USER, "OpenStack-API-Version": "compute 2.18"}
    body = {"server": {"name": "vm-old", "imageRef": images["raw"], "flavorRef": "m1"}}
    server = app.post_json(SERVERS, body, headers=old, status=202).json["server"]
    assert app.get(f"{SERVERS}/{server['id']}", headers=USER).json["server"][
        "description"] == "vm-old"
    body["server"]["description"] = "d"
    fault(app.post_json(SERVERS, body, headers=old, expect_errors=True), "badRequest", 400)


def test_admin_sees_host_and_fault_details(app: webtest.TestApp, images: dict[str, str],
                                           flavor: str, db: Database) -> None:
    uuid = _create(app, images).json["server"]["id"]
    db_instances.instance_update(db, uuid, {
        "vm_state": instance_states.ERROR, "task_state": None,
        **db_instances.fault_values("No valid host was found. ", 500,
                                    "ComputeFilter: 3 -> 3 host(s); X: 3 -> 0 host(s)")})
    member = app.get(f"{SERVERS}/{uuid}", headers=USER).json["server"]
    assert member["status"] == "ERROR"
    assert member["fault"]["message"].startswith("No valid host was found.")
    assert "details" not in member["fault"]
    admin = app.get(f"{SERVERS}/{uuid}", headers=ADMIN).json["server"]
    assert admin["fault"]["details"].endswith("X: 3 -> 0 host(s)")
    assert admin["OS-EXT-SRV-ATTR:host"] is None
    assert "OS-EXT-SRV-ATTR:hypervisor_hostname" in admin


def test_active_on_a_host(app: webtest.TestApp, images: dict[str, str], flavor: str,
                          conductor: StubConductorAPI) -> None:
    conductor.settle = "c2"
    uuid = _create(app, images).json["server"]["id"]
    admin = app.get(f"{SERVERS}/{uuid}", headers=ADMIN).json["server"]
    assert admin["status"] == "ACTIVE" and admin["OS-EXT-SRV-ATTR:host"] == "c2"
    assert admin["OS-EXT-SRV-ATTR:hypervisor_hostname"] == "c2" and admin["hostId"]
    assert "fault" not in admin


def test_counts_name_each_server(app: webtest.TestApp, images: dict[str, str], flavor: str,
                                 conductor: StubConductorAPI) -> None:
    response = _create(app, images, min_count=2, max_count=3, return_reservation_id=True)
    assert response.json["reservation_id"].startswith("r-")
    (method, (uuids, min_count)), = conductor.boot_calls
    assert method == "build_instances" and len(uuids) == 3 and min_count == 2
    names = sorted(s["name"] for s in app.get(SERVERS, headers=USER).json["servers"])
    assert names == ["vm-1", "vm-2", "vm-3"]
    fault(_create(app, images, status=400, min_count=3, max_count=2), "badRequest", 400)


@pytest.mark.parametrize(("change", "why"), [
    ({"imageRef": "99999999-9999-9999-9999-999999999999"}, "could not be found"),
    ({"imageRef": "not-an-image"}, "Invalid imageRef"),
    ({"flavorRef": "nope"}, "Flavor nope could not be found"),
    ({"networks": [{"uuid": "x"}]}, "networks"),
    ({"availability_zone": "a:b:c:d"}, "availability zone"),
    ({"min_count": 0}, "min_count"),
    ({"key_name": "k"}, "key_name"),
])
def test_bad_requests_are_400(app: webtest.TestApp, images: dict[str, str], flavor: str,
                              change: dict[str, Any], why: str) -> None:
    message = fault(_create(app, images, status=400, **change), "badRequest", 400)
    assert why in message


def test_queued_image_and_too_small_flavor_are_400(app: webtest.TestApp,
                                                   images: dict[str, str], flavor: str) -> None:
    fault(_create(app, images, status=400, imageRef=images["queued"]), "badRequest", 400)
    message = fault(_create(app, images, status=400, imageRef=images["big"]), "badRequest", 400)
    assert "too small" in message


def test_networks_required_from_2_37(app: webtest.TestApp, images: dict[str, str],
                                     flavor: str) -> None:
    body = {"server": {"name": "vm", "imageRef": images["raw"], "flavorRef": "m1"}}
    fault(app.post_json(SERVERS, body, headers=USER, expect_errors=True), "badRequest", 400)
    assert app.post_json(SERVERS, body, headers=PROJECT_USER).status_int == 202


def test_forced_host_is_admin_only(app: webtest.TestApp, images: dict[str, str], flavor: str,
                                   db: Database) -> None:
    fault(_create(app, images, status=403, availability_zone="az1:c3"), "forbidden", 403)
    uuid = _create(app, images, headers=ADMIN, availability_zone="az1:c3").json["server"]["id"]
    record = db_instances.instance_get(db, uuid)
    assert record["availability_zone"] == "az1" and record["requested_host"] == "c3"
    uuid = _create(app, images, headers=ADMIN, availability_zone=":c2").json["server"]["id"]
    record = db_instances.instance_get(db, uuid)
    assert record["availability_zone"] is None and record["requested_host"] == "c2"


def test_projects_see_only_their_servers(app: webtest.TestApp, images: dict[str, str],
                                         flavor: str) -> None:
    uuid = _create(app, images).json["server"]["id"]
    assert app.get(SERVERS + "/detail", headers=OTHER).json["servers"] == []
    fault(app.get(f"{SERVERS}/{uuid}", headers=OTHER, expect_errors=True), "itemNotFound", 404)
    fault(app.delete(f"{SERVERS}/{uuid}", headers=OTHER, expect_errors=True), "itemNotFound",
          404)
    admin_view = app.get(SERVERS, {"all_tenants": "1"}, headers=ADMIN).json["servers"]
    assert [s["id"] for s in admin_view] == [uuid]
    fault(app.get(SERVERS, {"all_tenants": "1"}, headers=USER, expect_errors=True),
          "forbidden", 403)
    reader = {**USER, "X-Roles": "reader"}
    assert app.get(f"{SERVERS}/{uuid}", headers=reader).status_int == 200
    fault(app.delete(f"{SERVERS}/{uuid}", headers=reader, expect_errors=True), "forbidden",
          403)


def test_delete_casts_for_a_placed_server(app: webtest.TestApp, images: dict[str, str],
                                          flavor: str, conductor: StubConductorAPI) -> None:
    conductor.settle = "c1"
    uuid = _create(app, images).json["server"]["id"]
    assert app.delete(f"{SERVERS}/{uuid}", headers=USER).status_int == 204
    assert conductor.boot_calls[-1] == ("delete_instance", uuid)
    fault(app.get(f"{SERVERS}/{uuid}", headers=USER, expect_errors=True), "itemNotFound", 404)


def test_delete_of_a_never_placed_server_is_local(app: webtest.TestApp,
                                                  images: dict[str, str], flavor: str,
                                                  conductor: StubConductorAPI,
                                                  db: Database) -> None:
    uuid = _create(app, images).json["server"]["id"]
    db_instances.instance_update(db, uuid, {"vm_state": instance_states.ERROR,
                                            "task_state": None})
    assert app.delete(f"{SERVERS}/{uuid}", headers=USER).status_int == 204
    assert [c[0] for c in conductor.boot_calls] == ["build_instances"]
    assert db_instances.instance_get(db, uuid, read_deleted=True)["vm_state"] == "deleted"


def test_unreachable_conductor_leaves_error_not_a_lost_server(
        app: webtest.TestApp, images: dict[str, str], flavor: str,
        conductor: StubConductorAPI) -> None:
    conductor.error = messaging.MessageDeliveryFailure("no broker")
    uuid = _create(app, images).json["server"]["id"]
    shown = app.get(f"{SERVERS}/{uuid}", headers=USER).json["server"]
    assert shown["status"] == "ERROR"
    assert "could not reach a conductor" in shown["fault"]["message"]


def test_rebuild(app: webtest.TestApp, images: dict[str, str], flavor: str,
                 conductor: StubConductorAPI, db: Database) -> None:
    uuid = _create(app, images).json["server"]["id"]
    action = f"{SERVERS}/{uuid}/action"
    body = {"rebuild": {"imageRef": images["raw"]}}
    # Still building: 409, as Nova.
    fault(app.post_json(action, body, headers=USER, expect_errors=True),
          "conflictingRequest", 409)
    db_instances.instance_update(db, uuid, {"vm_state": "active", "task_state": None,
                                            "host": "c1"})
    server = app.post_json(action, body, headers=USER, status=202).json["server"]
    assert server["status"] == "REBUILD" and server["OS-EXT-STS:task_state"] == "rebuilding"
    assert conductor.boot_calls[-1] == ("rebuild_instance", uuid)
    fault(app.post_json(action, {"reboot": {}}, headers=USER, expect_errors=True),
          "badRequest", 400)
    fault(app.post_json(action, {"rebuild": {}}, headers=USER, expect_errors=True),
          "badRequest", 400)


def test_the_openstack_clients_body_is_accepted(app: webtest.TestApp, images: dict[str, str],
                                                flavor: str, db: Database) -> None:
    # What python-openstackclient 10.5.0 sends for --image I --network none.
    bdm = [{"uuid": images["raw"], "boot_index": 0, "source_type": "image",
            "destination_type": "local", "delete_on_termination": True}]
    server = _create(app, images, networks=[{"uuid": "none"}], block_device_mapping_v2=bdm,
                     min_count=1, max_count=1).json["server"]
    assert db_instances.instance_get(db, server["id"])["image_ref"] == images["raw"]
    other = [{**bdm[0], "uuid": images["queued"]}]
    fault(_create(app, images, status=400, block_device_mapping_v2=other), "badRequest", 400)
    volume = [{**bdm[0], "source_type": "volume"}]
    fault(_create(app, images, status=400, block_device_mapping_v2=volume), "badRequest", 400)
    fault(_create(app, images, status=400, networks=[{"uuid": "net1"}]), "badRequest", 400)


def test_the_pseudo_network_none(app: webtest.TestApp) -> None:
    assert app.get("/v2.1/networks/none", headers=USER).json["network"]["id"] == "none"
    fault(app.get("/v2.1/networks/net1", headers=USER, expect_errors=True), "itemNotFound", 404)
    assert [n["id"] for n in app.get("/v2.1/networks", {"name": "none"}).json["networks"]] == [
        "none"]
    assert app.get("/v2.1/networks", {"name": "other"}).json["networks"] == []


def _listed(app: webtest.TestApp, path: str = SERVERS, **query: Any) -> list[str]:
    return [s["name"] for s in app.get(path, query, headers=USER).json["servers"]]


@pytest.fixture
def named(app: webtest.TestApp, images: dict[str, str], flavor: str) -> list[str]:
    """Three servers of the raw image (oldest first): two of flavor ``m1``, one of ``m2``."""
    app.post_json("/v2.1/flavors", {"flavor": {"name": "m2", "id": "m2", "ram": 512,
                                               "vcpus": 1, "disk": 1}})
    names = ["web-instance-1", "web-instance-22", "db"]
    for name in names[:2]:
        _create(app, images, name=name)
    _create(app, images, name=names[2], flavorRef="http://localhost/v2.1/flavors/m2")
    return names


def test_name_is_a_regular_expression_as_nova(app: webtest.TestApp,
                                              named: list[str]) -> None:
    assert _listed(app, name=r"^.*\-instance\-[0-9]+$") == ["web-instance-22",
                                                              "web-instance-1"]
    assert _listed(app, SERVERS + "/detail", name="instance-2") == ["web-instance-22"]
    assert _listed(app, name="b-in") == ["web-instance-22", "web-instance-1"]
    assert _listed(app, name="^db$") == ["db"]
    assert _listed(app, name="nothing") == []


@pytest.mark.parametrize("pattern", ["(", "(a|aa)*c", "(a+)+$", r"(a)\1", "(?P<x>a)(?P=x)",
                                     ".*a.*b.*c", "a" * 256])
def test_a_name_filter_that_could_stall_or_does_not_parse_is_400(
        app: webtest.TestApp, named: list[str], pattern: str) -> None:
    message = fault(app.get(SERVERS, {"name": pattern}, headers=USER, expect_errors=True),
                    "badRequest", 400)
    assert "Invalid name filter" in message


def test_policy_is_checked_before_the_query(app: webtest.TestApp) -> None:
    nobody = {**USER, "X-Roles": "nobody"}
    for query in ({"limit": "x"}, {"name": "("}, {"marker": "nope"}):
        fault(app.get(SERVERS, query, headers=nobody, expect_errors=True), "forbidden", 403)


def test_matching_past_its_time_budget_is_400(app: webtest.TestApp, named: list[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_filters, "MATCH_BUDGET_SECONDS", -1.0)
    message = fault(app.get(SERVERS, {"name": "web"}, headers=USER, expect_errors=True),
                    "badRequest", 400)
    assert "took too long" in message


def test_image_and_flavor_filters(app: webtest.TestApp, images: dict[str, str],
                                  named: list[str]) -> None:
    assert _listed(app, flavor="m2") == ["db"]
    assert _listed(app, flavor="http://localhost/flavors/m1") == ["web-instance-22",
                                                                  "web-instance-1"]
    assert _listed(app, flavor="nope") == []
    assert len(_listed(app, image=images["raw"])) == 3
    assert _listed(app, image=images["big"]) == []
    assert _listed(app, image=images["raw"], flavor="m2", name="d") == ["db"]


def test_limit_and_marker_page_as_nova(app: webtest.TestApp, named: list[str]) -> None:
    first = app.get(SERVERS, {"limit": "2"}, headers=USER).json
    assert [s["name"] for s in first["servers"]] == ["db", "web-instance-22"]
    (link,) = first["servers_links"]
    assert f"marker={first['servers'][1]['id']}" in link["href"]
    rest = app.get(link["href"].removeprefix("http://localhost"), headers=USER).json
    assert [s["name"] for s in rest["servers"]] == ["web-instance-1"]
    assert "servers_links" not in rest
    assert _listed(app, SERVERS + "/detail", limit="1") == ["db"]
    message = fault(app.get(SERVERS, {"marker": "nope"}, headers=USER, expect_errors=True),
                    "badRequest", 400)
    assert "marker [nope] not found" in message
    # Another project's server is no marker for this one.
    theirs = app.get(SERVERS, headers=USER).json["servers"][0]["id"]
    fault(app.get(SERVERS, {"marker": theirs}, headers=OTHER, expect_errors=True),
          "badRequest", 400)


def _set_image_fields(conf: cfg.ConfigOpts, image_id: str, **fields: Any) -> None:
    meta = pathlib.Path(conf.image_source.local_directory) / f"{image_id}.json"
    body = json.loads(meta.read_text())
    meta.write_text(json.dumps({**body, **fields}))


@pytest.mark.parametrize(("minimums", "message"), [
    ({"min_ram": 1024}, "Flavor's memory is too small for requested image."),
    ({"min_disk": 2}, "Flavor's disk is smaller than the minimum size specified in image "
                      "metadata. Flavor disk is 1073741824 bytes, minimum size is "
                      "2147483648 bytes."),
])
def test_flavor_below_the_images_minimums_is_400(
        app: webtest.TestApp, images: dict[str, str], flavor: str, conf: cfg.ConfigOpts,
        conductor: StubConductorAPI, minimums: dict[str, int], message: str) -> None:
    _set_image_fields(conf, images["raw"], **minimums)
    assert message in fault(_create(app, images, status=400), "badRequest", 400)
    assert conductor.boot_calls == []


def test_flavor_at_the_images_minimums_boots(
        app: webtest.TestApp, images: dict[str, str], flavor: str,
        conf: cfg.ConfigOpts) -> None:
    _set_image_fields(conf, images["raw"], min_ram=512, min_disk=1)
    assert _create(app, images).status_int == 202


def test_stop_and_start_change_the_state_as_nova(
        app: webtest.TestApp, images: dict[str, str], flavor: str, conductor: StubConductorAPI,
        db: Database) -> None:
    uuid = _create(app, images).json["server"]["id"]
    action = f"{SERVERS}/{uuid}/action"
    # Still building: 409, as Nova.
    fault(app.post_json(action, {"os-stop": None}, headers=USER, expect_errors=True),
          "conflictingRequest", 409)
    db_instances.instance_update(db, uuid, {"vm_state": "active", "task_state": None,
                                            "host": "c1"})
    fault(app.post_json(action, {"os-start": None}, headers=USER, expect_errors=True),
          "conflictingRequest", 409)
    stopped = app.post_json(action, {"os-stop": None}, headers=USER, status=202)
    assert stopped.body == b""
    shown = app.get(f"{SERVERS}/{uuid}", headers=USER).json["server"]
    assert shown["status"] == "SHUTOFF" and shown["OS-EXT-STS:power_state"] == 4
    assert shown["OS-EXT-STS:vm_state"] == "stopped"
    fault(app.post_json(action, {"os-stop": None}, headers=USER, expect_errors=True),
          "conflictingRequest", 409)
    # A stopped server is no rebuild source here (Nova's is: see docs/api.md).
    fault(app.post_json(action, {"rebuild": {"imageRef": images["raw"]}}, headers=USER,
                        expect_errors=True), "conflictingRequest", 409)
    app.post_json(action, {"os-start": None}, headers=USER, status=202)
    shown = app.get(f"{SERVERS}/{uuid}", headers=USER).json["server"]
    assert shown["status"] == "ACTIVE" and shown["OS-EXT-STS:power_state"] == 1
    assert conductor.boot_calls == [("build_instances", ([uuid], 1))]  # nothing cast
    fault(app.post_json(action, {"os-stop": None}, headers=OTHER, expect_errors=True),
          "itemNotFound", 404)
    reader = {**USER, "X-Roles": "reader"}
    fault(app.post_json(action, {"os-stop": None}, headers=reader, expect_errors=True),
          "forbidden", 403)


def test_put_changes_what_the_owner_says_as_nova(app: webtest.TestApp, images: dict[str, str],
                                                 flavor: str) -> None:
    uuid = _create(app, images, description="d0").json["server"]["id"]
    path = f"{SERVERS}/{uuid}"
    changed = app.put_json(path, {"server": {
        "name": "new-name", "accessIPv4": "192.0.2.1", "accessIPv6": "2001:DB8:0::1",
        "OS-DCF:diskConfig": "AUTO", "description": "d1"}}, headers=USER).json["server"]
    assert changed["name"] == "new-name" and changed["id"] == uuid
    shown = app.get(path, headers=USER).json["server"]
    assert (shown["name"], shown["description"]) == ("new-name", "d1")
    assert (shown["accessIPv4"], shown["accessIPv6"]) == ("192.0.2.1", "2001:db8::1")
    assert shown["OS-DCF:diskConfig"] == "AUTO"
    unchanged = app.put_json(path, {"server": {}}, headers=USER).json["server"]
    assert (unchanged["name"], unchanged["description"]) == ("new-name", "d1")
    assert app.put_json(path, {"server": {"description": None}}, headers=USER).json[
        "server"]["description"] is None
    for bad in ({"name": ""}, {"name": " x"}, {"hostname": "h"}, {"accessIPv6": "1.2.3.4"},
                {"description": "x" * 256}, {"metadata": {}}):
        fault(app.put_json(path, {"server": bad}, headers=USER, expect_errors=True),
              "badRequest", 400)
    v2_18 = {**PROJECT_USER, "OpenStack-API-Version": "compute 2.18"}
    fault(app.put_json(path, {"server": {"description": "d"}}, headers=v2_18,
                       expect_errors=True), "badRequest", 400)
    fault(app.put_json(path, {"server": {"name": "x"}}, headers=OTHER, expect_errors=True),
          "itemNotFound", 404)
    reader = {**USER, "X-Roles": "reader"}
    fault(app.put_json(path, {"server": {"name": "x"}}, headers=reader, expect_errors=True),
          "forbidden", 403)


#: What Nova's ``PUT /servers/{id}`` answers below 2.75 (its view with every ``show_*``
#: off), here for a building server at 2.74: Tempest's ``update_server`` schema allows no more.
SHORT_VIEW = {"id", "name", "links", "status", "tenant_id", "user_id", "metadata", "hostId",
              "image", "flavor", "created", "updated", "addresses", "accessIPv4", "accessIPv6",
              "OS-DCF:diskConfig", "description", "progress"}


@pytest.mark.parametrize("headers", [USER, ADMIN])
def test_put_answers_novas_short_view_below_2_75(app: webtest.TestApp, images: dict[str, str],
                                                 flavor: str, headers: dict[str, str]) -> None:
    uuid = _create(app, images).json["server"]["id"]
    path = f"{SERVERS}/{uuid}"
    v2_74 = {**headers, "OpenStack-API-Version": "compute 2.74"}
    short = app.put_json(path, {"server": {"name": "n"}}, headers=v2_74).json["server"]
    assert set(short) == SHORT_VIEW
    full = app.put_json(path, {"server": {"name": "n"}}, headers=headers).json["server"]
    assert full == app.get(path, headers=headers).json["server"]


@pytest.fixture
def stopped(app: webtest.TestApp, images: dict[str, str], flavor: str,
            db: Database) -> dict[str, str]:
    """Servers by status: one building, one active, one stopped (``os-stop``), one in error,
    one active being rebuilt."""
    made = {}
    for name, values in (("building", {}),
                         ("active", {"vm_state": "active", "task_state": None}),
                         ("shutoff", {"vm_state": "active", "task_state": None}),
                         ("error", {"vm_state": "error", "task_state": None}),
                         ("rebuild", {"vm_state": "active", "task_state": "rebuilding"})):
        uuid = _create(app, images, name=name).json["server"]["id"]
        if values:
            db_instances.instance_update(db, uuid, {**values, "host": "c1"})
        made[name] = uuid
    app.post_json(f"{SERVERS}/{made['shutoff']}/action", {"os-stop": None}, headers=USER,
                  status=202)
    return made


@pytest.mark.parametrize(("query", "expected"), [
    ({"status": "SHUTOFF"}, {"shutoff"}),
    ({"status": "shutoff"}, {"shutoff"}),
    ({"status": "BUILD"}, {"building"}),
    ({"status": "ERROR"}, {"error"}),
    ({"status": "REBUILD"}, {"rebuild"}),
    # Nova: ACTIVE selects vm_state active whatever the task (a rebuild is ACTIVE too).
    ({"status": "ACTIVE"}, {"active", "rebuild"}),
    ({"status": ["SHUTOFF", "ERROR"]}, {"shutoff", "error"}),
    ({"status": "PAUSED"}, set()),
    ({"status": "SHUTOFF", "name": "^err"}, set()),
])
def test_status_filter_as_nova(app: webtest.TestApp, stopped: dict[str, str],
                               query: dict[str, Any], expected: set[str]) -> None:
    by_id = {uuid: name for name, uuid in stopped.items()}
    for path in (SERVERS, f"{SERVERS}/detail"):
        listed = app.get(path, query, headers=USER).json["servers"]
        assert {by_id[s["id"]] for s in listed} == expected


def test_unknown_status_is_empty_below_2_38_and_400_from_it(app: webtest.TestApp,
                                                            stopped: dict[str, str]) -> None:
    v2_37 = {**PROJECT_USER, "OpenStack-API-Version": "compute 2.37"}
    assert app.get(SERVERS, {"status": "nope"}, headers=v2_37).json["servers"] == []
    message = fault(app.get(SERVERS, {"status": "nope"}, headers=USER, expect_errors=True),
                    "badRequest", 400)
    assert message == "Invalid status value"
    listed = app.get(SERVERS, {"status": ["nope", "shutoff"]}, headers=USER).json["servers"]
    assert [s["id"] for s in listed] == [stopped["shutoff"]]
