"""Every /os-aggregates route and its errors, shaped as Nova's."""

from __future__ import annotations

import json

import pytest
import webtest

from fleetcache.common import exception
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import (
    LATEST,
    MEMBER,
    StubConductorAPI,
    create_aggregate,
    fault,
)

AGGS = "/v2.1/os-aggregates"


def _action(app: webtest.TestApp, agg_id: int, body: object, **kw: object) -> webtest.TestResponse:
    # OSC sends actions without a microversion header (openstacksdk 4.22 passes
    # microversion=None for add_host, remove_host and set_metadata): so do these.
    return app.post_json(f"{AGGS}/{agg_id}/action", body, **kw)  # type: ignore[arg-type]


def test_create_returns_200_and_the_aggregate_as_nova(app: webtest.TestApp, db: Database) -> None:
    response = app.post_json(
        AGGS, {"aggregate": {"name": "agg1", "availability_zone": "az1"}}, headers=LATEST
    )
    assert response.status_int == 200
    agg = response.json["aggregate"]
    # Nova's create answer: no hosts, no metadata (Tempest's schema refuses them).
    assert set(agg) == {"id", "name", "availability_zone", "created_at", "updated_at",
                        "deleted_at", "deleted", "uuid"}
    assert agg["id"] == 1 and agg["name"] == "agg1" and agg["availability_zone"] == "az1"
    assert agg["deleted"] is False and agg["deleted_at"] is None
    assert agg["uuid"] == db_aggregates.aggregate_get(db, 1)["uuid"]
    shown = app.get(f"{AGGS}/1").json["aggregate"]
    assert shown["hosts"] == [] and shown["metadata"] == {"availability_zone": "az1"}


def test_list_and_show_always_include_hosts_and_metadata(app: webtest.TestApp) -> None:
    create_aggregate(app, "a")
    for response in (app.get(AGGS), app.get(f"{AGGS}/1")):
        body = response.json
        agg = body["aggregates"][0] if "aggregates" in body else body["aggregate"]
        assert agg["hosts"] == [] and agg["metadata"] == {}
        assert "uuid" not in agg  # 2.1: no uuid


def test_show_by_uuid(app: webtest.TestApp) -> None:
    agg = create_aggregate(app, "a")
    shown = app.get(f"{AGGS}/{agg['uuid']}", headers=LATEST).json["aggregate"]
    assert shown["id"] == agg["id"]


@pytest.mark.parametrize(
    "ident", ["42", "agg1", "1.5", "-1", "0", "11111111-2222-3333-4444-555555555555"]
)
def test_unknown_or_non_integer_id_is_404(app: webtest.TestApp, ident: str) -> None:
    create_aggregate(app, "agg1")
    response = app.get(f"{AGGS}/{ident}", expect_errors=True)
    fault(response, "itemNotFound", 404)


def test_update_name_and_zone(app: webtest.TestApp) -> None:
    create_aggregate(app, "a")
    body = {"aggregate": {"name": "b", "availability_zone": "z2"}}
    agg = app.put_json(f"{AGGS}/1", body, headers=LATEST).json["aggregate"]
    assert agg["name"] == "b" and agg["availability_zone"] == "z2"
    assert agg["metadata"]["availability_zone"] == "z2" and agg["updated_at"]


def test_update_errors(app: webtest.TestApp) -> None:
    create_aggregate(app, "a")
    create_aggregate(app, "b")
    fault(app.put_json(f"{AGGS}/1", {"aggregate": {"name": "b"}}, expect_errors=True),
          "conflictingRequest", 409)
    fault(app.put_json(f"{AGGS}/1", {"aggregate": {}}, expect_errors=True), "badRequest", 400)
    fault(app.put_json(f"{AGGS}/9", {"aggregate": {"name": "c"}}, expect_errors=True),
          "itemNotFound", 404)
    fault(app.put_json(f"{AGGS}/x", {"aggregate": {"name": "c"}}, expect_errors=True),
          "itemNotFound", 404)


def test_delete_returns_200_empty(app: webtest.TestApp) -> None:
    create_aggregate(app, "a")
    response = app.delete(f"{AGGS}/1", headers=LATEST)
    assert response.status_int == 200 and response.body == b""
    fault(app.get(f"{AGGS}/1", expect_errors=True), "itemNotFound", 404)
    fault(app.delete(f"{AGGS}/1", expect_errors=True), "itemNotFound", 404)


def test_delete_with_hosts_is_400_as_nova(app: webtest.TestApp, computes: list[str]) -> None:
    create_aggregate(app, "a")
    _action(app, 1, {"add_host": {"host": "c1"}})
    message = fault(app.delete(f"{AGGS}/1", expect_errors=True), "badRequest", 400)
    assert "c1" in message


def test_duplicate_name_is_409(app: webtest.TestApp) -> None:
    create_aggregate(app, "a")
    response = app.post_json(AGGS, {"aggregate": {"name": "a"}}, expect_errors=True)
    assert "already exists" in fault(response, "conflictingRequest", 409)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"aggregate": {}},
        {"aggregate": {"name": ""}},
        {"aggregate": {"name": " padded "}},
        {"aggregate": {"name": "x" * 256}},
        {"aggregate": {"name": "a", "extra": 1}},
        {"aggregate": {"name": 5}},
        {"aggregate": {"name": "a", "availability_zone": "bad:zone"}},
        {"aggregate": {"name": "a"}, "other": 1},
        [],
    ],
)
def test_create_malformed_body_is_400_with_message(app: webtest.TestApp, body: object) -> None:
    response = app.post_json(AGGS, body, expect_errors=True)
    assert len(fault(response, "badRequest", 400)) > 10


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe"])
def test_unparsable_body_is_400(app: webtest.TestApp, raw: bytes) -> None:
    response = app.post(AGGS, raw, content_type="application/json", expect_errors=True)
    fault(response, "badRequest", 400)


def test_add_and_remove_host(
    app: webtest.TestApp, computes: list[str], db: Database, conductor: StubConductorAPI
) -> None:
    create_aggregate(app, "a")
    agg = _action(app, 1, {"add_host": {"host": "c1"}}).json["aggregate"]
    assert agg["hosts"] == ["c1"] and agg["metadata"] == {}
    assert db_aggregates.aggregate_get(db, 1)["hosts"] == ["c1"]
    assert conductor.aggregate_syncs == ["c1"]
    agg = _action(app, 1, {"remove_host": {"host": "c1"}}).json["aggregate"]
    assert agg["hosts"] == []
    assert conductor.aggregate_syncs == ["c1", "c1"]


def test_add_host_is_answered_when_the_placement_mirror_cannot_be_cast(
    app: webtest.TestApp, computes: list[str], conductor: StubConductorAPI
) -> None:
    def refuse(ctxt: object, host: str) -> None:
        raise exception.RPCVersionCapped(topic="conductor", cap="1.1",
                                         method="sync_host_aggregates", version="1.2")

    conductor.sync_host_aggregates = refuse  # type: ignore[method-assign]
    create_aggregate(app, "a")
    assert _action(app, 1, {"add_host": {"host": "c1"}}).json["aggregate"]["hosts"] == ["c1"]


def test_add_host_errors(app: webtest.TestApp, computes: list[str]) -> None:
    create_aggregate(app, "a")
    _action(app, 1, {"add_host": {"host": "c1"}})
    fault(_action(app, 1, {"add_host": {"host": "c1"}}, expect_errors=True),
          "conflictingRequest", 409)
    fault(_action(app, 1, {"add_host": {"host": "nohost"}}, expect_errors=True),
          "itemNotFound", 404)
    fault(_action(app, 9, {"add_host": {"host": "c2"}}, expect_errors=True), "itemNotFound", 404)
    fault(_action(app, 1, {"add_host": {}}, expect_errors=True), "badRequest", 400)
    fault(_action(app, 1, {"add_host": {"host": "c2", "x": 1}}, expect_errors=True),
          "badRequest", 400)


def test_remove_absent_host_is_404_with_nova_message(
    app: webtest.TestApp, computes: list[str]
) -> None:
    create_aggregate(app, "a")
    message = fault(_action(app, 1, {"remove_host": {"host": "c2"}}, expect_errors=True),
                    "itemNotFound", 404)
    assert message == "Cannot remove host c2 in aggregate 1"


def test_set_metadata_sets_and_null_deletes(app: webtest.TestApp) -> None:
    create_aggregate(app, "a")
    agg = _action(app, 1, {"set_metadata": {"metadata": {"k1": "v1", "k2": "v2"}}}).json
    assert agg["aggregate"]["metadata"] == {"k1": "v1", "k2": "v2"}
    agg = _action(app, 1, {"set_metadata": {"metadata": {"k1": None, "k3": "v3"}}}).json
    assert agg["aggregate"]["metadata"] == {"k2": "v2", "k3": "v3"}


def test_metadata_keys_differing_only_in_case_conflict(app: webtest.TestApp) -> None:
    create_aggregate(app, "a")
    _action(app, 1, {"set_metadata": {"metadata": {"ssd": "true"}}})
    message = fault(_action(app, 1, {"set_metadata": {"metadata": {"SSD": "false"}}},
                            expect_errors=True), "conflictingRequest", 409)
    assert "differs only in case" in message
    agg = _action(app, 1, {"set_metadata": {"metadata": {
        "image_isolation_property": "secure, gpu"}}}).json
    assert agg["aggregate"]["metadata"]["image_isolation_property"] == "secure, gpu"


@pytest.mark.parametrize(
    "body",
    [
        {"set_metadata": {"metadata": {"bad/key": "v"}}},
        {"set_metadata": {"metadata": {"k": 1}}},
        {"set_metadata": {"metadata": {"k": "v" * 256}}},
        {"set_metadata": {"metadata": {"image_isolation_property": " , "}}},
        {"set_metadata": {"metadata": {"image_isolation_property": ""}}},
        {"set_metadata": {}},
        {"no_such_action": {}},
        {"add_host": {"host": "c1"}, "remove_host": {"host": "c1"}},
        {},
    ],
)
def test_action_malformed_is_400(app: webtest.TestApp, body: object) -> None:
    create_aggregate(app, "a")
    fault(_action(app, 1, body, expect_errors=True), "badRequest", 400)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", AGGS, None),
        ("POST", AGGS, {"aggregate": {"name": "b"}}),
        ("GET", f"{AGGS}/1", None),
        ("PUT", f"{AGGS}/1", {"aggregate": {"name": "b"}}),
        ("DELETE", f"{AGGS}/1", None),
        ("POST", f"{AGGS}/1/action", {"add_host": {"host": "c1"}}),
        ("POST", f"{AGGS}/1/action", {"remove_host": {"host": "c1"}}),
        ("POST", f"{AGGS}/1/action", {"set_metadata": {"metadata": {"k": "v"}}}),
    ],
)
def test_member_is_forbidden(
    app: webtest.TestApp, computes: list[str], method: str, path: str, body: object
) -> None:
    create_aggregate(app, "a")
    response = app.request(
        path, method=method, headers=MEMBER, expect_errors=True,
        body=json.dumps(body).encode() if body is not None else b"",
        content_type="application/json",
    )
    assert "Policy doesn't allow" in fault(response, "forbidden", 403)
    assert app.get(f"{AGGS}/1").json["aggregate"]["name"] == "a"
