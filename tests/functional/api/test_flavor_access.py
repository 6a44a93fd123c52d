"""Flavor access (nova/api/openstack/compute/flavor_access.py): the projects a private flavor
is shared with, who then see it; Nova's answers and errors, admins only."""

from __future__ import annotations

from typing import Any

import pytest
import webtest

from tests.functional.api.helpers import LATEST, PROJECT_USER, fault

FLAVORS = "/v2.1/flavors"
V2_1 = {"OpenStack-API-Version": "compute 2.1"}
#: A user of project p2 (PROJECT_USER is one of p1).
OTHER_USER = {"X-Roles": "member,reader", "X-User-Id": "u2", "X-Project-Id": "p2"}
ADMIN = {"X-Roles": "admin,member,reader", "X-User-Id": "a1", "X-Project-Id": "p0"}


def _flavor(app: webtest.TestApp, flavorid: str, public: bool = False) -> None:
    app.post_json(FLAVORS, {"flavor": {"name": flavorid, "id": flavorid, "ram": 64, "vcpus": 1,
                                       "disk": 1, "os-flavor-access:is_public": public}})


def _action(app: webtest.TestApp, flavorid: str, body: Any, headers: Any = LATEST,
            **kw: Any) -> webtest.TestResponse:
    return app.post_json(f"{FLAVORS}/{flavorid}/action", body, headers=headers, **kw)


def _add(app: webtest.TestApp, flavorid: str, project: str, **kw: Any) -> webtest.TestResponse:
    return _action(app, flavorid, {"addTenantAccess": {"tenant": project}}, **kw)


def _remove(app: webtest.TestApp, flavorid: str, project: str,
            **kw: Any) -> webtest.TestResponse:
    return _action(app, flavorid, {"removeTenantAccess": {"tenant": project}}, **kw)


def _ids(app: webtest.TestApp, headers: Any, path: str = FLAVORS + "/detail") -> list[str]:
    return [f["id"] for f in app.get(path, headers=headers).json["flavors"]]


def test_add_list_remove_answer_the_access_list(app: webtest.TestApp) -> None:
    _flavor(app, "priv")
    assert app.get(f"{FLAVORS}/priv/os-flavor-access").json == {"flavor_access": []}
    assert _add(app, "priv", "p1").json == {
        "flavor_access": [{"flavor_id": "priv", "tenant_id": "p1"}]}
    assert _add(app, "priv", "p2").json["flavor_access"][1] == {
        "flavor_id": "priv", "tenant_id": "p2"}
    listed = app.get(f"{FLAVORS}/priv/os-flavor-access").json["flavor_access"]
    assert [a["tenant_id"] for a in listed] == ["p1", "p2"]
    assert _remove(app, "priv", "p1").json == {
        "flavor_access": [{"flavor_id": "priv", "tenant_id": "p2"}]}


def test_a_shared_flavor_is_seen_by_its_projects_only(app: webtest.TestApp) -> None:
    _flavor(app, "pub", public=True)
    _flavor(app, "priv")
    assert _ids(app, PROJECT_USER) == ["pub"]
    fault(app.get(f"{FLAVORS}/priv", headers=PROJECT_USER, expect_errors=True),
          "itemNotFound", 404)
    _add(app, "priv", "p1")
    assert _ids(app, PROJECT_USER) == ["pub", "priv"]
    assert _ids(app, PROJECT_USER, FLAVORS) == ["pub", "priv"]
    shown = app.get(f"{FLAVORS}/priv", headers={**PROJECT_USER, **LATEST}).json["flavor"]
    assert shown["os-flavor-access:is_public"] is False
    assert app.get(f"{FLAVORS}/priv/os-extra_specs", headers=PROJECT_USER).json == {
        "extra_specs": {}}
    # Another project still does not see it, whatever it asks for.
    assert _ids(app, OTHER_USER) == ["pub"]
    assert _ids(app, OTHER_USER, FLAVORS + "?is_public=false") == ["pub"]
    fault(app.get(f"{FLAVORS}/priv", headers=OTHER_USER, expect_errors=True),
          "itemNotFound", 404)
    _remove(app, "priv", "p1")
    assert _ids(app, PROJECT_USER) == ["pub"]


def test_admins_list_public_and_their_projects_flavors_unless_asked(
        app: webtest.TestApp) -> None:
    _flavor(app, "pub", public=True)
    _flavor(app, "priv")
    _flavor(app, "mine")
    _add(app, "mine", "p0", headers={**ADMIN, **LATEST})
    assert _ids(app, ADMIN) == ["pub", "mine"]  # Nova's default is_public=true
    assert _ids(app, ADMIN, FLAVORS + "/detail?is_public=false") == ["priv", "mine"]
    assert _ids(app, ADMIN, FLAVORS + "/detail?is_public=none") == ["pub", "priv", "mine"]
    assert app.get(f"{FLAVORS}/priv", headers=ADMIN).json["flavor"]["id"] == "priv"


def test_errors_are_novas(app: webtest.TestApp) -> None:
    _flavor(app, "priv")
    _flavor(app, "pub", public=True)
    _add(app, "priv", "p1")
    message = fault(_add(app, "priv", "p1", expect_errors=True), "conflictingRequest", 409)
    assert message == ("Flavor access already exists for flavor priv and project p1 "
                       "combination.")
    message = fault(_remove(app, "priv", "p2", expect_errors=True), "itemNotFound", 404)
    assert message == "Flavor access not found for priv / p2 combination."
    message = fault(app.get(f"{FLAVORS}/pub/os-flavor-access", expect_errors=True),
                    "itemNotFound", 404)
    assert message == "Access list not available for public flavors."
    message = fault(_add(app, "pub", "p1", expect_errors=True), "conflictingRequest", 409)
    assert message == "Can not add access to a public flavor."
    for response in (app.get(f"{FLAVORS}/nope/os-flavor-access", expect_errors=True),
                     _add(app, "nope", "p1", expect_errors=True),
                     _remove(app, "nope", "p1", expect_errors=True)):
        fault(response, "itemNotFound", 404)


def test_below_2_7_a_public_flavor_takes_access_as_nova_records_it(
        app: webtest.TestApp) -> None:
    _flavor(app, "pub", public=True)
    assert _add(app, "pub", "p1", headers=V2_1).json["flavor_access"] == [
        {"flavor_id": "pub", "tenant_id": "p1"}]


@pytest.mark.parametrize("body", [
    {}, {"addTenantAccess": {}}, {"addTenantAccess": {"tenant": ""}},
    {"addTenantAccess": {"tenant": "x" * 256}}, {"addTenantAccess": {"tenant": 1}},
    {"addTenantAccess": {"tenant": "p1", "extra": 1}}, {"addTenantAccess": "p1"},
    {"removeTenantAccess": None}, {"nova": {"tenant": "p1"}},
    {"addTenantAccess": {"tenant": "p1"}, "removeTenantAccess": {"tenant": "p1"}}, [],
])
def test_bad_bodies_are_400(app: webtest.TestApp, body: Any) -> None:
    _flavor(app, "priv")
    fault(_action(app, "priv", body, expect_errors=True), "badRequest", 400)
    assert app.get(f"{FLAVORS}/priv/os-flavor-access").json == {"flavor_access": []}


def test_members_are_forbidden_before_anything_is_looked_up(app: webtest.TestApp) -> None:
    _flavor(app, "priv")
    for flavorid in ("priv", "nope"):
        fault(app.get(f"{FLAVORS}/{flavorid}/os-flavor-access", headers=PROJECT_USER,
                      expect_errors=True), "forbidden", 403)
        for send in (_add, _remove):
            fault(send(app, flavorid, "p1", headers=PROJECT_USER, expect_errors=True),
                  "forbidden", 403)


def test_deleting_a_flavor_deletes_its_access_list(app: webtest.TestApp) -> None:
    _flavor(app, "priv")
    _add(app, "priv", "p1")
    app.delete(f"{FLAVORS}/priv", status=202)
    _flavor(app, "priv")
    assert app.get(f"{FLAVORS}/priv/os-flavor-access").json == {"flavor_access": []}
