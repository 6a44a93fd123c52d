"""/flavors and /flavors/{id}/os-extra_specs, shaped as Nova's, with its policies."""

from __future__ import annotations

from typing import Any

import pytest
import webtest

from tests.functional.api.helpers import LATEST, PROJECT_USER, fault

FLAVORS = "/v2.1/flavors"
V2_1 = {"OpenStack-API-Version": "compute 2.1"}


def _create(app: webtest.TestApp, name: str = "m1.small", headers: Any = LATEST,
            **extra: Any) -> dict[str, Any]:
    body = {"flavor": {"name": name, "ram": 512, "vcpus": 1, "disk": 1, **extra}}
    flavor: dict[str, Any] = app.post_json(FLAVORS, body, headers=headers).json["flavor"]
    return flavor


def test_create_generates_an_id_and_shows_nova_fields(app: webtest.TestApp) -> None:
    flavor = _create(app, description="small one")
    assert len(flavor["id"]) == 36 and flavor["name"] == "m1.small"
    assert flavor["ram"] == 512 and flavor["vcpus"] == 1 and flavor["disk"] == 1
    assert flavor["OS-FLV-EXT-DATA:ephemeral"] == 0 and flavor["swap"] == 0
    assert flavor["os-flavor-access:is_public"] is True and flavor["rxtx_factor"] == 1.0
    assert flavor["description"] == "small one" and flavor["extra_specs"] == {}
    assert flavor["links"][0]["href"].endswith(f"/v2.1/flavors/{flavor['id']}")


def test_old_versions_hide_description_specs_and_show_empty_swap(app: webtest.TestApp) -> None:
    flavor = _create(app, id="f1")
    shown = app.get(f"{FLAVORS}/f1", headers=V2_1).json["flavor"]
    assert shown["id"] == "f1" and shown["swap"] == ""
    assert "description" not in shown and "extra_specs" not in shown
    assert flavor["id"] == "f1"
    # A description below 2.55 is an unknown field.
    body = {"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 0, "description": "d"}}
    fault(app.post_json(FLAVORS, body, headers=V2_1, expect_errors=True), "badRequest", 400)


def test_list_and_detail(app: webtest.TestApp) -> None:
    _create(app, "a", id="a")
    _create(app, "b", id="b", **{"os-flavor-access:is_public": False})
    assert [f["id"] for f in app.get(FLAVORS).json["flavors"]] == ["a"]
    everything = app.get(FLAVORS + "/detail", {"is_public": "none"}).json["flavors"]
    assert [f["id"] for f in everything] == ["a", "b"] and everything[1]["ram"] == 512
    assert set(app.get(FLAVORS).json["flavors"][0]) == {"id", "name", "links"}
    # A member sees public flavors only, whatever it asks.
    mine = app.get(FLAVORS, {"is_public": "none"}, headers=PROJECT_USER).json["flavors"]
    assert [f["id"] for f in mine] == ["a"]
    fault(app.get(f"{FLAVORS}/b", headers=PROJECT_USER, expect_errors=True), "itemNotFound", 404)
    fault(app.get(FLAVORS, {"is_public": "maybe"}, expect_errors=True), "badRequest", 400)


def test_duplicates_are_409(app: webtest.TestApp) -> None:
    _create(app, "a", id="a")
    fault(app.post_json(FLAVORS, {"flavor": {"name": "a", "ram": 1, "vcpus": 1, "disk": 0}},
                        expect_errors=True), "conflictingRequest", 409)
    fault(app.post_json(FLAVORS, {"flavor": {"name": "b", "id": "a", "ram": 1, "vcpus": 1,
                                             "disk": 0}}, expect_errors=True),
          "conflictingRequest", 409)


@pytest.mark.parametrize("bad", [
    {"ram": 0}, {"ram": "0"}, {"vcpus": -1}, {"vcpus": "-1"}, {"disk": "1.5"},
    {"disk": ""}, {"disk": "9" * 255}, {"swap": str(2**31)}, {"id": " lead"}, {"name": ""},
    {"rxtx_factor": 0}, {"rxtx_factor": "0"}, {"rxtx_factor": "-1"}, {"rxtx_factor": "x"},
    {"swap": 2**31}, {"extra": 1}, {"os-flavor-access:is_public": "maybe"},
    {"os-flavor-access:is_public": 1}, {"id": True},
])
def test_bad_bodies_are_400(app: webtest.TestApp, bad: dict[str, Any]) -> None:
    body = {"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 0, **bad}}
    fault(app.post_json(FLAVORS, body, headers=LATEST, expect_errors=True), "badRequest", 400)


@pytest.mark.parametrize(("value", "expected"), [
    ("True", True), ("false", False), ("on", True), ("0", False), ("NO", False), (True, True),
])
def test_is_public_takes_novas_boolean_strings(app: webtest.TestApp, value: object,
                                               expected: bool) -> None:
    flavor = _create(app, **{"os-flavor-access:is_public": value})
    assert flavor["os-flavor-access:is_public"] is expected


@pytest.mark.parametrize(("given", "stored"), [(42, "42"), ("43", "43"), ("f.1", "f.1")])
def test_id_may_be_a_number_or_its_text(app: webtest.TestApp, given: object,
                                        stored: str) -> None:
    assert _create(app, id=given)["id"] == stored
    assert app.get(f"{FLAVORS}/{stored}").json["flavor"]["id"] == stored


def test_numbers_may_be_digit_strings_and_rxtx_factor_is_kept(
    app: webtest.TestApp,
) -> None:
    flavor = _create(app, ram="1024", vcpus="2", disk="10", swap="0", rxtx_factor=2,
                     **{"OS-FLV-EXT-DATA:ephemeral": "1"})
    assert (flavor["ram"], flavor["vcpus"], flavor["disk"]) == (1024, 2, 10)
    assert flavor["OS-FLV-EXT-DATA:ephemeral"] == 1 and flavor["swap"] == 0
    assert flavor["rxtx_factor"] == 2.0
    assert app.get(f"{FLAVORS}/{flavor['id']}").json["flavor"]["rxtx_factor"] == 2.0
    assert _create(app, "m2", rxtx_factor="1.5")["rxtx_factor"] == 1.5
    listed = {f["name"]: f["rxtx_factor"]
              for f in app.get(f"{FLAVORS}/detail").json["flavors"]}
    assert listed["m2"] == 1.5


def test_update_description_from_2_55(app: webtest.TestApp) -> None:
    _create(app, id="f1")
    body = {"flavor": {"description": "new"}}
    assert app.put_json(f"{FLAVORS}/f1", body, headers=LATEST).json["flavor"][
        "description"] == "new"
    fault(app.put_json(f"{FLAVORS}/f1", body, headers=V2_1, expect_errors=True),
          "itemNotFound", 404)


def test_delete_is_202_and_admin_only(app: webtest.TestApp) -> None:
    _create(app, id="f1")
    fault(app.delete(f"{FLAVORS}/f1", headers=PROJECT_USER, expect_errors=True),
          "forbidden", 403)
    assert app.delete(f"{FLAVORS}/f1").status_int == 202
    fault(app.get(f"{FLAVORS}/f1", expect_errors=True), "itemNotFound", 404)
    fault(app.delete(f"{FLAVORS}/f1", expect_errors=True), "itemNotFound", 404)


def test_member_may_not_create(app: webtest.TestApp) -> None:
    body = {"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 0}}
    fault(app.post_json(FLAVORS, body, headers=PROJECT_USER, expect_errors=True),
          "forbidden", 403)


def test_extra_specs_crud(app: webtest.TestApp) -> None:
    _create(app, id="f1")
    specs = f"{FLAVORS}/f1/os-extra_specs"
    body = {"extra_specs": {"aggregate_instance_extra_specs:ssd": "true", "trait:CUSTOM_X":
                            "required"}}
    assert app.post_json(specs, body).json == body
    assert app.get(specs, headers=PROJECT_USER).json == body
    assert app.get(f"{specs}/trait:CUSTOM_X").json == {"trait:CUSTOM_X": "required"}
    assert app.put_json(f"{specs}/trait:CUSTOM_X", {"trait:CUSTOM_X": "forbidden"}).json == {
        "trait:CUSTOM_X": "forbidden"}
    shown = app.get(f"{FLAVORS}/f1", headers=LATEST).json["flavor"]
    assert shown["extra_specs"]["trait:CUSTOM_X"] == "forbidden"
    assert app.delete(f"{specs}/trait:CUSTOM_X").status_int == 200
    fault(app.get(f"{specs}/trait:CUSTOM_X", expect_errors=True), "itemNotFound", 404)
    fault(app.delete(f"{specs}/trait:CUSTOM_X", expect_errors=True), "itemNotFound", 404)
    fault(app.put_json(f"{specs}/a", {"b": "1"}, expect_errors=True), "badRequest", 400)
    fault(app.post_json(specs, {"extra_specs": {"bad/key": "1"}}, expect_errors=True),
          "badRequest", 400)
    fault(app.post_json(specs, body, headers=PROJECT_USER, expect_errors=True), "forbidden",
          403)
    fault(app.get(f"{FLAVORS}/nope/os-extra_specs", expect_errors=True), "itemNotFound", 404)


def _ids(app: webtest.TestApp, path: str = FLAVORS, **query: Any) -> list[str]:
    return [f["id"] for f in app.get(path, query).json["flavors"]]


def test_min_ram_and_min_disk_filter_as_nova(app: webtest.TestApp) -> None:
    for name, ram, disk in (("a", 512, 1), ("b", 1024, 10), ("c", 2048, 5)):
        _create(app, name, id=name, ram=ram, disk=disk)
    assert _ids(app, minRam="1024") == ["b", "c"]
    assert _ids(app, FLAVORS + "/detail", minDisk="5") == ["b", "c"]
    assert _ids(app, minRam="1024", minDisk="6") == ["b"]
    assert _ids(app, minRam="0") == ["a", "b", "c"]
    for name in ("minRam", "minDisk"):
        message = fault(app.get(FLAVORS, {name: "lots"}, expect_errors=True), "badRequest", 400)
        assert f"Invalid {name} filter [lots]" in message
        for bad in ("--5", "-", "1.5", "9" * 19, "\u0663"):
            fault(app.get(FLAVORS, {name: bad}, expect_errors=True), "badRequest", 400)


def test_limit_and_marker_page_as_nova(app: webtest.TestApp) -> None:
    for name in ("a", "b", "c"):
        _create(app, name, id=name)
    first = app.get(FLAVORS, {"limit": "2"}).json
    assert [f["id"] for f in first["flavors"]] == ["a", "b"]
    (link,) = first["flavors_links"]
    assert link["rel"] == "next" and link["href"].startswith("http://localhost/v2.1/flavors?")
    assert "marker=b" in link["href"] and "limit=2" in link["href"]
    second = app.get(link["href"].removeprefix("http://localhost")).json
    assert [f["id"] for f in second["flavors"]] == ["c"] and "flavors_links" not in second
    assert _ids(app, FLAVORS + "/detail", marker="a") == ["b", "c"]
    assert _ids(app, limit="0") == []
    # The marker is looked up before the filters, as Nova.
    assert _ids(app, marker="a", minRam="100000") == []
    for query, text in (({"marker": "nope"}, "marker [nope] not found"),
                        ({"limit": "-1"}, "limit param must be positive"),
                        ({"limit": "x"}, "limit param must be an integer")):
        assert text in fault(app.get(FLAVORS, query, expect_errors=True), "badRequest", 400)
