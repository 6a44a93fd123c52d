"""Quotas as Nova enforces them with Keystone's unified limits: ``POST /servers`` over a limit
is a 403, ``GET /limits`` and ``/os-quota-sets`` answer Nova's shapes, a project limit
overrides the registered default. Keystone is oslo.limit's own fixture here; the real one is
``tests/integration/test_quotas.py``'s."""

from __future__ import annotations

import io
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import webtest
from oslo_config import cfg
from oslo_limit import fixture as limit_fixture

from fleetcache.api import wsgi
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db.session import Database
from fleetcache.image import local
from tests.functional.api.helpers import LATEST, PROJECT_ADMIN, PROJECT_USER, StubConductorAPI
from tests.functional.api.keystone_limits import REGISTERED, keystone_limits, use_unified_limits

SERVERS = "/v2.1/servers"
USER = {**PROJECT_USER, **LATEST}
ADMIN = {**PROJECT_ADMIN, **LATEST}
OTHER = {**USER, "X-Project-Id": "p2", "X-User-Id": "u2"}
#: A project limit of p2 (PROJECT_USER's is p1).
P2_LIMITS = {"servers": 3, "class:VCPU": 100}


@pytest.fixture
def limits() -> Iterator[limit_fixture.LimitFixture]:
    with keystone_limits(REGISTERED, {"p2": dict(P2_LIMITS)}) as fixture:
        yield fixture


@pytest.fixture
def app(conf: cfg.ConfigOpts, db: Database, conductor: StubConductorAPI,
        limits: limit_fixture.LimitFixture, tmp_path: pathlib.Path) -> webtest.TestApp:
    return _make_app(conf, conductor, tmp_path)


def _make_app(conf: cfg.ConfigOpts, conductor: StubConductorAPI,
              tmp_path: pathlib.Path) -> webtest.TestApp:
    """The API with unified limits, an image and two flavors (small, big)."""
    use_unified_limits(conf)
    directory = tmp_path / "images"
    directory.mkdir()
    conf.set_override("backend", "local", group="image_source")
    conf.set_override("local_directory", str(directory), group="image_source")
    application = webtest.TestApp(wsgi.init_application(conf, conductor_api=conductor))
    image = local.add_image(str(directory), io.BytesIO(b"x" * 10), name="raw",
                            disk_format="raw").id
    application.extra_environ = {"fleetcache.test.image": image}
    for flavorid, vcpus, ram, disk in (("small", 1, 512, 1), ("big", 8, 4096, 5)):
        application.post_json("/v2.1/flavors", {"flavor": {
            "name": flavorid, "id": flavorid, "ram": ram, "vcpus": vcpus, "disk": disk}})
    return application


def _create(app: webtest.TestApp, flavor: str = "small", headers: Any = USER,
            status: int = 202, **extra: Any) -> webtest.TestResponse:
    body = {"server": {"name": "vm", "imageRef": app.extra_environ["fleetcache.test.image"],
                       "flavorRef": flavor, "networks": "none", **extra}}
    return app.post_json(SERVERS, body, headers=headers, status=status)


def _count(db: Database, project: str = "p1") -> int:
    return len(db_instances.instance_list(db, project_id=project))


def _forbidden(response: webtest.TestResponse) -> str:
    assert response.json["forbidden"]["code"] == 403
    message: str = response.json["forbidden"]["message"]
    return message


# -- POST /servers -------------------------------------------------------------------------


def test_under_the_quota_succeeds_and_over_it_is_novas_403(app: webtest.TestApp,
                                                           db: Database) -> None:
    for _ in range(10):
        _create(app)
    message = _forbidden(_create(app, status=403))
    assert message == ("Quota exceeded for instances: Requested 1, but already used 10 of 10 "
                       "instances")
    assert _count(db) == 10


def test_cores_ram_and_disk_are_counted_from_the_flavors(app: webtest.TestApp,
                                                         db: Database) -> None:
    _create(app, "big")
    _create(app, "big")  # 16 of 20 VCPU, 10 of 20 GB of disk
    message = _forbidden(_create(app, "big", status=403))
    assert message == "Quota exceeded for cores: Requested 8, but already used 16 of 20 cores"
    for _ in range(4):
        _create(app)  # 20 VCPU
    message = _forbidden(_create(app, status=403))
    assert message.startswith("Quota exceeded for cores: Requested 1, but already used 20 of 20")


def test_a_project_limit_overrides_the_registered_default(app: webtest.TestApp,
                                                          db: Database) -> None:
    for _ in range(3):
        _create(app, headers=OTHER)
    message = _forbidden(_create(app, headers=OTHER, status=403))
    assert message == "Quota exceeded for instances: Requested 1, but already used 3 of 3 instances"
    _create(app)  # p1 keeps the registered default of 10


def test_an_unlimited_project_limit_is_no_limit(app: webtest.TestApp, db: Database,
                                                limits: limit_fixture.LimitFixture) -> None:
    limits.projlimits["p2"]["servers"] = -1
    _create(app, headers=OTHER, max_count=12)
    assert _count(db, "p2") == 12


def test_multiple_create_makes_as_many_as_fit(app: webtest.TestApp, db: Database,
                                              conductor: StubConductorAPI) -> None:
    """As Nova: max_count is cut down to what the quota allows, down to min_count."""
    _create(app)
    _create(app, max_count=1000)
    assert _count(db) == 10
    method, (uuids, min_count) = conductor.boot_calls[-1]
    assert (method, len(uuids), min_count) == ("build_instances", 9, 1)


def test_multiple_create_below_min_count_is_403_and_creates_nothing(
        app: webtest.TestApp, db: Database) -> None:
    for _ in range(8):
        _create(app)
    message = _forbidden(_create(app, min_count=3, max_count=5, status=403))
    assert message == ("Quota exceeded for instances: Requested 3, but already used 8 of 10 "
                       "instances")
    assert _count(db) == 8


def test_a_server_in_error_counts_until_deleted(app: webtest.TestApp, db: Database) -> None:
    server = _create(app, max_count=10).json["server"]["id"]
    db_instances.instance_update(db, server, {"vm_state": "error", "task_state": None})
    _create(app, status=403)
    app.delete(f"{SERVERS}/{server}", headers=USER, status=204)
    _create(app)


def test_metadata_over_the_registered_limit_is_403(app: webtest.TestApp,
                                                    limits: limit_fixture.LimitFixture) -> None:
    limits.reglimits["server_metadata_items"] = 2
    message = _forbidden(_create(app, metadata={"a": "1", "b": "2", "c": "3"}, status=403))
    assert message == "Quota exceeded for metadata_items: a server holds at most 2 metadata items."
    _create(app, metadata={"a": "1", "b": "2"})


def test_a_resource_without_a_registered_limit_has_none_left(
        app: webtest.TestApp, limits: limit_fixture.LimitFixture) -> None:
    """oslo.limit's rule (Nova's documentation warns of it): no registered limit is 0."""
    del limits.reglimits["class:DISK_GB"]
    message = _forbidden(_create(app, status=403))
    assert message == ("Quota exceeded for class:DISK_GB: Requested 1, but already used 0 of 0 "
                       "class:DISK_GB")


def test_without_keystone_a_create_is_503_naming_oslo_limit(
        conf: cfg.ConfigOpts, db: Database, conductor: StubConductorAPI,
        tmp_path: pathlib.Path) -> None:
    """Without the fixture, oslo.limit has no service user to ask Keystone with."""
    response = _create(_make_app(conf, conductor, tmp_path), status=503)
    fault = response.json["serviceUnavailable"]
    assert fault["error_code"] == "fleetcache.quota.limits_unavailable"
    assert "[oslo_limit]" in fault["message"]
    assert _count(db) == 0


# -- GET /limits -------------------------------------------------------------------------


def test_limits_show_the_project_limits_and_usage(app: webtest.TestApp) -> None:
    _create(app, "big")
    absolute = app.get("/v2.1/limits", headers=USER).json["limits"]["absolute"]
    assert absolute == {
        "maxTotalInstances": 10, "maxTotalCores": 20, "maxTotalRAMSize": 51200,
        "maxServerMeta": 128, "maxTotalKeypairs": 100, "maxServerGroups": 10,
        "maxServerGroupMembers": 10, "totalInstancesUsed": 1, "totalCoresUsed": 8,
        "totalRAMUsed": 4096, "totalServerGroupsUsed": 0}
    assert app.get("/v2.1/limits", headers=OTHER).json["limits"]["absolute"][
        "maxTotalInstances"] == 3


@pytest.mark.parametrize(("version", "present", "absent"), [
    ("2.1", ["maxImageMeta", "maxPersonality", "maxSecurityGroups", "totalFloatingIpsUsed"],
     []),
    ("2.36", ["maxImageMeta", "maxPersonality"], ["maxSecurityGroups", "totalFloatingIpsUsed",
                                                  "maxTotalFloatingIps"]),
    ("2.39", ["maxPersonality"], ["maxImageMeta"]),
    ("2.57", [], ["maxPersonality", "maxPersonalitySize", "maxImageMeta"]),
])
def test_limits_change_with_novas_microversions(app: webtest.TestApp, version: str,
                                                present: list[str], absent: list[str]) -> None:
    headers = {**PROJECT_USER, "OpenStack-API-Version": f"compute {version}"}
    body = app.get("/v2.1/limits", headers=headers).json["limits"]
    assert body["rate"] == []
    assert set(present) <= set(body["absolute"])
    assert not set(absent) & set(body["absolute"])


def test_another_projects_limits_are_for_admins(app: webtest.TestApp) -> None:
    app.get("/v2.1/limits?tenant_id=p2", headers=USER, status=403)
    absolute = app.get("/v2.1/limits?tenant_id=p2", headers=ADMIN).json["limits"]["absolute"]
    assert absolute["maxTotalInstances"] == 3


def test_unknown_query_parameters_are_400_from_2_75(app: webtest.TestApp) -> None:
    app.get("/v2.1/limits?foo=1", headers={**PROJECT_USER, "OpenStack-API-Version":
                                           "compute 2.74"}, status=200)
    app.get("/v2.1/limits?foo=1", headers=USER, status=400)
    app.get("/v2.1/limits?tenant_id=" + "x" * 300, headers=ADMIN, status=400)


# -- /os-quota-sets ----------------------------------------------------------------------


def test_quota_set_is_the_projects_limits(app: webtest.TestApp) -> None:
    quota_set = app.get("/v2.1/os-quota-sets/p2", headers=ADMIN).json["quota_set"]
    assert quota_set == {"id": "p2", "cores": 100, "instances": 3, "ram": 51200,
                         "metadata_items": 128, "key_pairs": 100, "server_groups": 10,
                         "server_group_members": 10}
    defaults = app.get("/v2.1/os-quota-sets/p2/defaults", headers=ADMIN).json["quota_set"]
    assert defaults["instances"] == 10 and defaults["cores"] == 20


def test_quota_set_names_follow_novas_microversions(app: webtest.TestApp) -> None:
    old = app.get("/v2.1/os-quota-sets/p1", headers=PROJECT_USER).json["quota_set"]
    assert old["fixed_ips"] == old["security_groups"] == -1
    assert old["injected_files"] == 5
    mid = app.get("/v2.1/os-quota-sets/p1", headers={
        **PROJECT_USER, "OpenStack-API-Version": "compute 2.36"}).json["quota_set"]
    assert "fixed_ips" not in mid and mid["injected_file_path_bytes"] == 255
    assert "injected_files" not in app.get("/v2.1/os-quota-sets/p1",
                                           headers=USER).json["quota_set"]


def test_quota_set_detail_has_the_usage(app: webtest.TestApp) -> None:
    _create(app, max_count=2)
    detail = app.get("/v2.1/os-quota-sets/p1/detail", headers=USER).json["quota_set"]
    assert detail["instances"] == {"in_use": 2, "limit": 10, "reserved": 0}
    assert detail["cores"] == {"in_use": 2, "limit": 20, "reserved": 0}
    assert detail["ram"] == {"in_use": 1024, "limit": 51200, "reserved": 0}


def test_quota_sets_policy_is_novas(app: webtest.TestApp) -> None:
    app.get("/v2.1/os-quota-sets/p2", headers=USER, status=403)
    app.get("/v2.1/os-quota-sets/p2/detail", headers=USER, status=403)
    app.get("/v2.1/os-quota-sets/p2/defaults", headers=USER, status=200)
    app.put_json("/v2.1/os-quota-sets/p1", {"quota_set": {"instances": 1}}, headers=USER,
                 status=403)
    app.delete("/v2.1/os-quota-sets/p1", headers=USER, status=403)


def test_update_and_delete_change_nothing_as_nova_with_unified_limits(
        app: webtest.TestApp) -> None:
    updated = app.put_json("/v2.1/os-quota-sets/p1", {"quota_set": {
        "instances": 1, "cores": "2", "force": "True"}}, headers=ADMIN).json["quota_set"]
    assert "id" not in updated and updated["instances"] == 10 and updated["cores"] == 20
    assert app.delete("/v2.1/os-quota-sets/p1", headers=ADMIN, status=202).body == b""
    assert app.get("/v2.1/os-quota-sets/p1", headers=ADMIN).json["quota_set"]["instances"] == 10


@pytest.mark.parametrize(("version", "body"), [
    ("2.81", {"quota_set": {"instances": -2}}),
    ("2.81", {"quota_set": {"instances": "ten"}}),
    ("2.81", {"quota_set": {"instances": 2**31}}),
    ("2.81", {"quota_set": {"fixed_ips": 1}}),
    ("2.81", {"quota_set": {"injected_files": 1}}),
    ("2.36", {"quota_set": {"floating_ips": 1}}),
    ("2.81", {"quota_set": {"force": "perhaps"}}),
    ("2.81", {"quota": {}}),
    ("2.81", [1]),
])
def test_update_bodies_nova_refuses_are_400(app: webtest.TestApp, version: str,
                                            body: Any) -> None:
    headers = {**PROJECT_ADMIN, "OpenStack-API-Version": f"compute {version}"}
    response = app.put_json("/v2.1/os-quota-sets/p1", body, headers=headers, status=400)
    assert response.json["badRequest"]["code"] == 400


def test_a_project_id_that_cannot_be_one_is_400(app: webtest.TestApp) -> None:
    response = app.get("/v2.1/os-quota-sets/" + "p" * 256, headers=ADMIN, status=400)
    assert "is not a valid project" in response.json["badRequest"]["message"]
