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


def _operations(document: dict[str, object]) -> list[dict[str, object]]:
    paths = document["paths"]
    assert isinstance(paths, dict)
    return [op for item in paths.values() for method, op in item.items()
            if method != "parameters"]


def test_operation_ids_are_unique(app: webtest.TestApp) -> None:
    ids = [op["operationId"] for op in _operations(app.get("/openapi.json").json)]
    assert len(ids) == len(set(ids))


def test_query_parameters_and_microversion_headers_are_documented(app: webtest.TestApp) -> None:
    paths = app.get("/openapi.json").json["paths"]
    services = {p["name"] for p in paths["/v2.1/os-services"]["get"]["parameters"]}
    assert {"host", "binary", "OpenStack-API-Version",
            "X-OpenStack-Nova-API-Version"} <= services
    assert "id" in {p["name"] for p in paths["/v2.1/v2/images"]["get"]["parameters"]}
    (header,) = paths["/v2.1/os-aggregates/{aggregate_id}/images"]["post"]["parameters"]
    assert header["required"] is True
    assert header["schema"]["enum"][:2] == ["compute 2.81", "compute latest"]
    # fleetcache's own resource also reads the fleetcache axis (the terms need 1.1).
    assert "compute 2.81, fleetcache 1.1" in header["schema"]["enum"]
    assert "compute latest, fleetcache latest" in header["schema"]["enum"]
    services = paths["/v2.1/os-services"]["get"]["parameters"]
    assert not any("fleetcache" in str(p["schema"]) for p in services)


def test_openapi_documents_the_terms_of_a_request_and_of_a_job(app: webtest.TestApp) -> None:
    document = app.get("/openapi.json").json
    images = document["paths"]["/v2.1/os-aggregates/{aggregate_id}/images"]["post"]
    body = images["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert body["fleetcache:window"]["additionalProperties"] is False
    assert body["fleetcache:priority"]["maximum"] == 100
    job = document["components"]["schemas"]["Job"]
    assert {"terms", "next_start_at"} <= set(job["required"])
    assert "scheduled" in job["properties"]["state"]["enum"]
    assert set(job["properties"]["terms"]["properties"]) == {
        "not_before", "window", "deadline", "parallelism", "origin_downloads",
        "host_bytes_per_second", "job_bytes_per_second", "priority"}


def test_response_schemas_have_required_fields(app: webtest.TestApp) -> None:
    schemas = app.get("/openapi.json").json["components"]["schemas"]
    for name in ("Aggregate", "Service", "Job", "Version"):
        assert schemas[name]["required"], name


def test_published_patterns_are_the_validators(app: webtest.TestApp) -> None:
    from fleetcache.api.schemas import aggregates, parameter_types

    document = app.get("/openapi.json").json
    assert document["components"]["schemas"]["Name"] == parameter_types.NAME
    create = document["paths"]["/v2.1/os-aggregates"]["post"]["requestBody"]
    inner = create["content"]["application/json"]["schema"]["properties"]["aggregate"]
    assert inner["properties"]["name"] == {"$ref": "#/components/schemas/Name"}
    assert aggregates.CREATE["properties"]["aggregate"]["properties"]["name"] is (
        parameter_types.NAME)


def test_response_components_do_not_shadow_the_shared_request_schemas() -> None:
    # The document merges both under components/schemas: a response schema named like a
    # shared request schema (AvailabilityZone) was silently replaced by it.
    from fleetcache.api import openapi, openapi_responses

    assert set(openapi_responses.COMPONENTS).isdisjoint(openapi.SHARED_SCHEMAS)
