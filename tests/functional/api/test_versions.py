"""Version discovery and microversion negotiation, as both clients need them.

``openstack`` (openstacksdk 4.22) reads ``GET /v2.1`` and gives up without ``status`` ("No
stability status in version") or a ``self`` link ("No version data found remotely at all"),
then negotiates ``min(server max, 2.81)``; ``nova`` (novaclient 18.13) needs ``version`` and
``min_version``. A request without a microversion header is 2.1.
"""

from __future__ import annotations

import pytest
import webtest
from oslo_config import cfg

from tests.functional.api.helpers import fault


@pytest.mark.parametrize("path", ["/v2.1", "/v2.1/"])
def test_version_document(app: webtest.TestApp, path: str) -> None:
    version = app.get(path, headers={"Accept": "application/json"}).json["version"]
    assert version["id"] == "v2.1"
    assert version["status"] == "CURRENT"
    assert version["version"] == "2.81"
    assert version["min_version"] == "2.1"
    assert version["links"] == [{"rel": "self", "href": "http://localhost/v2.1/"}]


def test_root_lists_v21_with_self_link(app: webtest.TestApp) -> None:
    versions = {v["id"]: v for v in app.get("/").json["versions"]}
    assert versions["v2.1"]["status"] == "CURRENT"
    assert versions["v2.1"]["links"][0]["href"] == "http://localhost/v2.1/"


def test_discovery_needs_no_roles(app: webtest.TestApp) -> None:
    assert app.get("/v2.1", headers={"X-Roles": "nobody"}).status_int == 200


def test_public_endpoint_used_in_links(app: webtest.TestApp, conf: cfg.ConfigOpts) -> None:
    conf.set_override("public_endpoint", "https://cloud.example.com/compute/", group="api")
    href = app.get("/v2.1").json["version"]["links"][0]["href"]
    assert href == "https://cloud.example.com/compute/v2.1/"


def test_no_header_is_21(app: webtest.TestApp) -> None:
    response = app.get("/v2.1/os-aggregates")
    assert response.headers["OpenStack-API-Version"] == "compute 2.1"
    assert response.headers["X-OpenStack-Nova-API-Version"] == "2.1"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"OpenStack-API-Version": "compute 2.81"}, "2.81"),
        ({"OpenStack-API-Version": "compute 2.53"}, "2.53"),
        ({"OpenStack-API-Version": "placement 1.2, compute 2.41"}, "2.41"),
        ({"OpenStack-API-Version": "compute latest"}, "2.81"),
        ({"X-OpenStack-Nova-API-Version": "2.81"}, "2.81"),
        ({"X-OpenStack-Nova-API-Version": "latest"}, "2.81"),
        ({"OpenStack-API-Version": "placement 1.2"}, "2.1"),
    ],
)
def test_requested_version_is_served(
    app: webtest.TestApp, headers: dict[str, str], expected: str
) -> None:
    response = app.get("/v2.1/os-aggregates", headers=headers)
    assert response.headers["OpenStack-API-Version"] == f"compute {expected}"
    assert "OpenStack-API-Version" in response.headers["Vary"]


@pytest.mark.parametrize("version", ["2.82", "3.0", "2.0", "1.1"])
def test_version_out_of_range_is_406(app: webtest.TestApp, version: str) -> None:
    response = app.get(
        "/v2.1/os-aggregates", headers={"OpenStack-API-Version": f"compute {version}"},
        expect_errors=True,
    )
    message = fault(response, "computeFault", 406)
    assert "Minimum is 2.1 and maximum is 2.81" in message


@pytest.mark.parametrize("version", ["2", "two.one", "2.1.1", "2.01", "2.1000000000",
                                     "2." + "1" * 4400])
def test_malformed_version_is_400(app: webtest.TestApp, version: str) -> None:
    response = app.get(
        "/v2.1/os-aggregates", headers={"X-OpenStack-Nova-API-Version": version},
        expect_errors=True,
    )
    message = fault(response, "badRequest", 400)
    assert "invalid format" in message
    assert len(message) < 200  # a long header is not quoted back whole


def test_uuid_shown_from_241(app: webtest.TestApp) -> None:
    app.post_json("/v2.1/os-aggregates", {"aggregate": {"name": "a"}})
    old = app.get("/v2.1/os-aggregates/1", headers={"OpenStack-API-Version": "compute 2.40"})
    new = app.get("/v2.1/os-aggregates/1", headers={"OpenStack-API-Version": "compute 2.41"})
    assert "uuid" not in old.json["aggregate"]
    assert len(new.json["aggregate"]["uuid"]) == 36


def test_root_lists_the_legacy_v20_entry_as_nova(app: webtest.TestApp) -> None:
    versions = app.get("/").json["versions"]
    assert [v["id"] for v in versions] == ["v2.0", "v2.1"]
    legacy = versions[0]
    assert legacy["status"] == "DEPRECATED"
    assert legacy["version"] == "" and legacy["min_version"] == ""
    assert legacy["links"] == [{"rel": "self", "href": "http://localhost/v2/"}]


@pytest.mark.parametrize("path", ["/v2", "/v2/"])
def test_every_listed_self_link_answers_with_its_entry(app: webtest.TestApp, path: str) -> None:
    # Tempest's test_get_version_details follows each self link of GET /.
    for listed in app.get("/", headers={"X-Roles": "nobody"}).json["versions"]:
        href = listed["links"][0]["href"].removeprefix("http://localhost")
        shown = app.get(href, headers={"X-Roles": "nobody"}).json["version"]
        assert shown["id"] == listed["id"]
        assert shown["links"] == listed["links"]
    assert app.get(path).json["version"]["media-types"][0]["type"].endswith("version=2")
