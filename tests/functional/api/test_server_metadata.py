"""/servers/{id}/metadata, shaped as Nova's: list, merge, replace, one key, limits, states,
policy."""

from __future__ import annotations

import io
import pathlib
from typing import Any

import pytest
import webtest
from oslo_config import cfg

from fleetcache.common.db import instances as db_instances
from fleetcache.common.db.session import Database
from fleetcache.image import local
from tests.functional.api.helpers import LATEST, PROJECT_USER, fault

SERVERS = "/v2.1/servers"
USER = {**PROJECT_USER, **LATEST}
OTHER = {**USER, "X-Project-Id": "p2"}
READER = {**USER, "X-Roles": "reader"}


@pytest.fixture
def server(app: webtest.TestApp, conf: cfg.ConfigOpts, tmp_path: pathlib.Path,
           db: Database) -> str:
    """An active server of project p1 with metadata {"a": "1"}."""
    directory = tmp_path / "images"
    conf.set_override("backend", "local", group="image_source")
    conf.set_override("local_directory", str(directory), group="image_source")
    image = local.add_image(str(directory), io.BytesIO(b"x" * 10), name="raw").id
    app.post_json("/v2.1/flavors", {"flavor": {"name": "m1", "id": "m1", "ram": 512,
                                               "vcpus": 1, "disk": 1}})
    body = {"server": {"name": "vm", "imageRef": image, "flavorRef": "m1",
                       "networks": "none", "metadata": {"a": "1"}}}
    uuid: str = app.post_json(SERVERS, body, headers=USER, status=202).json["server"]["id"]
    db_instances.instance_update(db, uuid, {"vm_state": "active", "task_state": None,
                                            "host": "c1"})
    return uuid


def _meta(app: webtest.TestApp, server: str) -> dict[str, Any]:
    body: dict[str, Any] = app.get(f"{SERVERS}/{server}/metadata", headers=READER).json
    return body


def test_list_merge_replace_as_nova(app: webtest.TestApp, server: str) -> None:
    path = f"{SERVERS}/{server}/metadata"
    assert _meta(app, server) == {"metadata": {"a": "1"}}
    merged = app.post_json(path, {"metadata": {"b": "2", "a": "x"}}, headers=USER).json
    assert merged == {"metadata": {"a": "x", "b": "2"}} == _meta(app, server)
    replaced = app.put_json(path, {"metadata": {"c": "3"}}, headers=USER).json
    assert replaced == {"metadata": {"c": "3"}} == _meta(app, server)
    assert app.put_json(path, {"metadata": {}}, headers=USER).json == {"metadata": {}}
    shown = app.get(f"{SERVERS}/{server}", headers=USER).json["server"]
    assert shown["metadata"] == {}


def test_one_key(app: webtest.TestApp, server: str) -> None:
    item = f"{SERVERS}/{server}/metadata"
    assert app.get(f"{item}/a", headers=READER).json == {"meta": {"a": "1"}}
    assert app.put_json(f"{item}/b c", {"meta": {"b c": "2"}}, headers=USER).json == {
        "meta": {"b c": "2"}}
    assert _meta(app, server)["metadata"] == {"a": "1", "b c": "2"}
    message = fault(app.put_json(f"{item}/a", {"meta": {"z": "2"}}, headers=USER,
                                 expect_errors=True), "badRequest", 400)
    assert message == "Request body and URI mismatch"
    for bad in ({"meta": {"a": "1", "b": "2"}}, {"meta": {}}, {"meta": {"a": 1}}, {}):
        fault(app.put_json(f"{item}/a", bad, headers=USER, expect_errors=True),
              "badRequest", 400)
    app.delete(f"{item}/a", headers=USER, status=204)
    assert _meta(app, server)["metadata"] == {"b c": "2"}
    for method in (app.get, app.delete):
        message = fault(method(f"{item}/a", headers=USER, expect_errors=True),
                        "itemNotFound", 404)
        assert message == "Metadata item was not found"


@pytest.mark.parametrize("bad", [
    {"metadata": {"": "v"}}, {"metadata": {"k/ey": "v"}}, {"metadata": {"k" * 256: "v"}},
    {"metadata": {"k": "v" * 256}}, {"metadata": {"k": None}}, {"metadata": []}, {},
    {"metadata": {}, "x": 1},
])
def test_bad_bodies_are_400(app: webtest.TestApp, server: str, bad: dict[str, Any]) -> None:
    for method in (app.post_json, app.put_json):
        fault(method(f"{SERVERS}/{server}/metadata", bad, headers=USER, expect_errors=True),
              "badRequest", 400)


def test_more_than_128_keys_is_403(app: webtest.TestApp, server: str) -> None:
    path = f"{SERVERS}/{server}/metadata"
    many = {f"k{n}": "v" for n in range(128)}
    # With the "a" already there, 128 more merged in make 129.
    fault(app.post_json(path, {"metadata": many}, headers=USER, expect_errors=True),
          "forbidden", 403)
    assert _meta(app, server)["metadata"] == {"a": "1"}
    assert len(app.put_json(path, {"metadata": many}, headers=USER).json["metadata"]) == 128
    fault(app.put_json(f"{path}/x", {"meta": {"x": "v"}}, headers=USER, expect_errors=True),
          "forbidden", 403)


def test_changes_need_an_active_or_stopped_server_without_a_task(
        app: webtest.TestApp, server: str, db: Database) -> None:
    path = f"{SERVERS}/{server}/metadata"
    db_instances.instance_update(db, server, {"task_state": "rebuilding"})
    for response in (
        app.post_json(path, {"metadata": {"b": "2"}}, headers=USER, expect_errors=True),
        app.put_json(path, {"metadata": {}}, headers=USER, expect_errors=True),
        app.put_json(f"{path}/b", {"meta": {"b": "2"}}, headers=USER, expect_errors=True),
        app.delete(f"{path}/a", headers=USER, expect_errors=True),
    ):
        fault(response, "conflictingRequest", 409)
    assert _meta(app, server)["metadata"] == {"a": "1"}  # reading is fine in any state
    db_instances.instance_update(db, server, {"task_state": None, "vm_state": "stopped"})
    app.post_json(path, {"metadata": {"b": "2"}}, headers=USER)
    db_instances.instance_update(db, server, {"vm_state": "error"})
    fault(app.delete(f"{path}/a", headers=USER, expect_errors=True), "conflictingRequest", 409)


def test_policy_and_other_projects(app: webtest.TestApp, server: str) -> None:
    path = f"{SERVERS}/{server}/metadata"
    fault(app.post_json(path, {"metadata": {"b": "2"}}, headers=READER, expect_errors=True),
          "forbidden", 403)
    fault(app.delete(f"{path}/a", headers=READER, expect_errors=True), "forbidden", 403)
    for method, url in ((app.get, path), (app.get, f"{path}/a"), (app.delete, f"{path}/a")):
        fault(method(url, headers=OTHER, expect_errors=True), "itemNotFound", 404)
    fault(app.get(f"{SERVERS}/00000000-0000-4000-8000-000000000000/metadata", headers=USER,
                  expect_errors=True), "itemNotFound", 404)
