"""What every response carries (request ids, JSON) and the errors of the router itself."""

from __future__ import annotations

import re

import pytest
import webtest

from tests.functional.api.helpers import LATEST, fault

REQ_ID = re.compile(r"^req-[0-9a-f-]{36}$")


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/"), ("GET", "/v2.1/os-aggregates"), ("GET", "/v2.1/nowhere"),
     ("DELETE", "/v2.1/os-aggregates")],
)
def test_every_response_has_request_ids(app: webtest.TestApp, method: str, path: str) -> None:
    response = app.request(path, method=method, expect_errors=True)
    assert REQ_ID.match(response.headers["X-Compute-Request-Id"])
    assert response.headers["X-Openstack-Request-Id"] == response.headers["X-Compute-Request-Id"]
    assert response.content_type == "application/json"


def test_unknown_route_is_item_not_found(app: webtest.TestApp) -> None:
    fault(app.get("/v2.1/os-flavors", expect_errors=True), "itemNotFound", 404)


def test_wrong_method_is_405_with_allow(app: webtest.TestApp) -> None:
    response = app.delete("/v2.1/os-aggregates", expect_errors=True)
    fault(response, "badMethod", 405)
    assert response.headers["Allow"] == "GET, POST"


def test_trailing_slash_is_ignored(app: webtest.TestApp) -> None:
    assert app.get("/v2.1/os-aggregates/", headers=LATEST).json == {"aggregates": []}


def test_fault_carries_stable_error_code(app: webtest.TestApp) -> None:
    response = app.get("/v2.1/os-aggregates/42", expect_errors=True)
    assert response.json["itemNotFound"]["error_code"] == "fleetcache.aggregate.not_found"


def test_unexpected_error_is_500_compute_fault(
    app: webtest.TestApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleetcache.common.db import aggregates as db_aggregates

    def boom(*args: object) -> None:
        raise RuntimeError("database on fire")

    monkeypatch.setattr(db_aggregates, "aggregate_list", boom)
    response = app.get("/v2.1/os-aggregates", expect_errors=True)
    message = fault(response, "computeFault", 500)
    assert "database on fire" not in message
    assert response.headers["X-Compute-Request-Id"]
