"""Hostile requests get Nova's 4xx faults, never a 500: each test is the request that found it.

Defects 1-6 were found by schemathesis and by hand against the local stack; the slow-client
defect (5) needs real sockets and lives in tests/integration/test_api_slow_clients.py.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import webtest

from fleetcache.api import util
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import LATEST, MEMBER, create_aggregate, fault

JSON_HEADERS = {"Content-Type": "application/json"}


def _post(app: webtest.TestApp, path: str, body: bytes | str, **headers: str) -> Any:
    return app.post(path, body, headers={**JSON_HEADERS, **LATEST, **headers},
                    expect_errors=True)


# 1. Non-ASCII digits in an id ---------------------------------------------------------------

@pytest.mark.parametrize("raw", ["%C2%B3", "%C2%B2", "%E2%91%A0", "%D9%A3%D9%A5%D9%A0",
                                 "%EF%BC%91"])
@pytest.mark.parametrize(
    ("method", "suffix"),
    [("GET", ""), ("PUT", ""), ("DELETE", ""), ("POST", "/action"), ("POST", "/images"),
     ("GET", "/images/jobs")],
)
def test_non_ascii_digits_in_an_aggregate_id_are_404(
    app: webtest.TestApp, db: Database, raw: str, method: str, suffix: str
) -> None:
    for number in range(1, 4):
        create_aggregate(app, f"agg{number}")
    body = {"PUT": b'{"aggregate": {"name": "x"}}', "POST": b'{"add_host": {"host": "c1"}}'}
    if suffix == "/images":
        body["POST"] = b'{"cache": [{"id": "a0b1c2d3-0000-4000-8000-000000000001"}]}'
    response = app.request(
        f"/v2.1/os-aggregates/{raw}{suffix}", method=method, body=body.get(method, b""),
        headers={**JSON_HEADERS, **LATEST}, expect_errors=True,
    )
    fault(response, "itemNotFound", 404)


def test_arabic_indic_350_is_not_aggregate_350() -> None:
    assert util.int_id("\u0663\u0665\u0660") is None
    assert util.int_id("350") == 350


# 2. A path that is not UTF-8 -----------------------------------------------------------------

def test_a_path_that_is_not_utf8_is_a_json_400_with_a_request_id(
    app: webtest.TestApp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="fleetcache.api.middleware")
    response = app.get("/v2.1/os-aggregates/%ff", expect_errors=True)
    fault(response, "badRequest", 400)
    assert response.headers["X-Compute-Request-Id"].startswith("req-")
    assert any("/v2.1/os-aggregates/\\xff" in r.getMessage() for r in caplog.records)


# 3. JSON nested 1,000 deep ------------------------------------------------------------------

@pytest.mark.parametrize("depth", [33, 1000, 50_000])
@pytest.mark.parametrize("path", ["/v2.1/os-aggregates", "/v2.1/os-aggregates/1/action"])
def test_deeply_nested_json_is_400(app: webtest.TestApp, depth: int, path: str) -> None:
    create_aggregate(app)
    message = fault(_post(app, path, "[" * depth + "]" * depth), "badRequest", 400)
    assert "nested deeper than 32" in message


# 4. A lone surrogate -------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v2.1/os-aggregates", '{"aggregate": {"name": "a\\ud800"}}'),
        ("/v2.1/os-aggregates", '{"aggregate": {"name": "a", "availability_zone": "\\ud800"}}'),
        ("/v2.1/os-aggregates/1/action", '{"set_metadata": {"metadata": {"k": "\\ud800"}}}'),
        ("/v2.1/os-aggregates/1/action", '{"set_metadata": {"metadata": {"\\udfff": "v"}}}'),
    ],
)
def test_a_lone_surrogate_is_400(
    app: webtest.TestApp, db: Database, path: str, body: str
) -> None:
    create_aggregate(app)
    fault(_post(app, path, body), "badRequest", 400)
    assert db_aggregates.aggregate_get(db, 1)["metadata"] == {}


# 6. Body size ---------------------------------------------------------------------------------

def test_a_body_over_the_limit_is_413(app: webtest.TestApp, db: Database) -> None:
    create_aggregate(app)
    metadata = {f"key{i}": "v" * 200 for i in range(50_000)}
    body = json.dumps({"set_metadata": {"metadata": metadata}})
    response = _post(app, "/v2.1/os-aggregates/1/action", body)
    assert "114688 bytes" in fault(response, "overLimit", 413)
    assert db_aggregates.aggregate_get(db, 1)["metadata"] == {}


def test_a_chunked_body_over_the_limit_is_413(app: webtest.TestApp) -> None:
    body = b'{"aggregate": {"name": "' + b"a" * 120_000 + b'"}}'
    request = webtest.TestRequest.blank("/v2.1/os-aggregates", method="POST",
                                        headers={**JSON_HEADERS, "Transfer-Encoding": "chunked"})
    request.environ["wsgi.input"] = io.BytesIO(body)
    request.environ["wsgi.input_terminated"] = True
    request.environ.pop("CONTENT_LENGTH", None)
    fault(app.do_request(request, expect_errors=True), "overLimit", 413)


def test_metadata_is_capped_per_request_and_per_aggregate(
    app: webtest.TestApp, db: Database
) -> None:
    create_aggregate(app)
    too_many = {f"k{i}": "v" for i in range(129)}
    response = _post(app, "/v2.1/os-aggregates/1/action",
                     json.dumps({"set_metadata": {"metadata": too_many}}))
    fault(response, "badRequest", 400)
    first = {f"a{i}": "v" for i in range(100)}
    app.post_json("/v2.1/os-aggregates/1/action", {"set_metadata": {"metadata": first}})
    more = {f"b{i}": "v" for i in range(29)}
    response = _post(app, "/v2.1/os-aggregates/1/action",
                     json.dumps({"set_metadata": {"metadata": more}}))
    fault(response, "forbidden", 403)
    # Deleting keys in the same request makes room.
    swap = more | {f"a{i}": None for i in range(29)}
    app.post_json("/v2.1/os-aggregates/1/action", {"set_metadata": {"metadata": swap}})
    assert len(db_aggregates.aggregate_get(db, 1)["metadata"]) == 100


def test_a_short_body_is_408(app: webtest.TestApp) -> None:
    request = webtest.TestRequest.blank("/v2.1/os-aggregates", method="POST",
                                        headers=JSON_HEADERS)
    request.environ["wsgi.input"] = io.BytesIO(b'{"aggr')
    request.environ["CONTENT_LENGTH"] = "1000"
    fault(app.do_request(request, expect_errors=True), "requestTimeout", 408)


# Also found ----------------------------------------------------------------------------------

def test_an_empty_x_roles_is_no_roles_not_the_default(app: webtest.TestApp) -> None:
    response = app.get("/v2.1/os-aggregates", headers={"X-Roles": ""}, expect_errors=True)
    fault(response, "forbidden", 403)
    app.get("/v2.1/os-aggregates", status=200)  # no header at all: the noauth default roles


@pytest.mark.parametrize("media_type", ["application/xml", "image/png",
                                        "application/x-www-form-urlencoded"])
def test_a_json_body_with_another_media_type_is_415(
    app: webtest.TestApp, media_type: str
) -> None:
    response = _post(app, "/v2.1/os-aggregates", b'{"aggregate": {"name": "a"}}',
                     **{"Content-Type": media_type})
    fault(response, "badMediaType", 415)


@pytest.mark.parametrize("media_type", ["application/json; charset=UTF-8", "text/plain", "",
                                        "application/vnd.openstack.compute+json"])
def test_json_media_types_are_read_as_json(app: webtest.TestApp, media_type: str) -> None:
    response = _post(app, "/v2.1/os-aggregates", b'{"aggregate": {"name": "a"}}',
                     **{"Content-Type": media_type})
    assert response.status_int == 200, response.body


def test_conflict_fault_key_is_novas(app: webtest.TestApp) -> None:
    create_aggregate(app)
    response = _post(app, "/v2.1/os-aggregates", b'{"aggregate": {"name": "agg1"}}')
    fault(response, "conflictingRequest", 409)


@pytest.mark.parametrize(
    "name",
    ["a\x7f", "a\x00b", "\x1bab", "a\u200bb", "a\u202eb", "a\U0001f600", "\x1cab", "ab\n",
     " ab", "ab\u3000"],
)
def test_names_nova_refuses_are_400(app: webtest.TestApp, name: str) -> None:
    body = json.dumps({"aggregate": {"name": name}})
    fault(_post(app, "/v2.1/os-aggregates", body), "badRequest", 400)


@pytest.mark.parametrize("name", ["a b", "é", "日本", "a\u00a0b", "x-1_y.z"])
def test_printable_names_are_accepted(app: webtest.TestApp, name: str) -> None:
    body = json.dumps({"aggregate": {"name": name}})
    assert _post(app, "/v2.1/os-aggregates", body).json["aggregate"]["name"] == name


def test_a_member_still_gets_403_on_a_hostile_body(app: webtest.TestApp) -> None:
    response = _post(app, "/v2.1/os-aggregates", b'{"aggregate": {"name": "a"}}', **MEMBER)
    fault(response, "forbidden", 403)
