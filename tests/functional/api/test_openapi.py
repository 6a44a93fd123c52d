"""The OpenAPI document covers every route of the route table."""

from __future__ import annotations

import webtest

from fleetcache.api import routes


def test_openapi_lists_every_route(app: webtest.TestApp) -> None:
    document = app.get("/openapi.json", headers={"X-Roles": "nobody"}).json
    assert document["openapi"].startswith("3.")
    for path, targets in routes.ROUTE_DECLARATIONS.items():
        assert set(document["paths"][path]) - {"parameters"} == {m.lower() for m in targets}


def test_openapi_documents_bodies_and_microversions(app: webtest.TestApp) -> None:
    paths = app.get("/openapi.json").json["paths"]
    images = paths["/v2.1/os-aggregates/{aggregate_id}/images"]["post"]
    assert images["x-openstack-min-microversion"] == "2.81"
    schema = images["requestBody"]["content"]["application/json"]["schema"]
    assert schema["properties"]["cache"]["minItems"] == 1
    assert "202" in images["responses"]
    assert paths["/v2.1/os-aggregates"]["post"]["summary"].startswith("Create an aggregate")
