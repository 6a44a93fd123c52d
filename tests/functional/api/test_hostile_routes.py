"""Every route of the route table, every method, against a set of hostile inputs: never a 5xx.

``test_fuzz.py`` generates requests from the OpenAPI document, which describes what a route
takes; this walk sends what no document describes (bytes that are not UTF-8 in a path segment or
in the query, NUL, duplicated and huge parameters, bodies that are not JSON objects, media types
that are not JSON, microversion headers that are not numbers), so that a new route is covered by
being added to ``routes.ROUTE_DECLARATIONS``. Each request is sent as the noauth admin and as a
project member. After the walk, ordinary requests must still be answered.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import webtest

from fleetcache.api import routes
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import LATEST, MEMBER, create_aggregate

#: Path segments sent in place of every ``{placeholder}``.
HOSTILE_SEGMENTS = [
    "%ff", "%ed%a0%80", "%c0%af", "%00", "a%00b", "%C2%B3", "%D9%A3", "%EF%BC%91", "%E2%80%AE",
    "%F0%9F%98%80", "%20", "%25", "..", "-1", "0", "9" * 40, "a" * 4000, "1.5", "%0a",
    "00000000-0000-0000-0000-00000000000%ff",
]
#: Query strings sent to every route (with its placeholders filled with real ids).
HOSTILE_QUERIES = [
    "x=%ff", "%ff=1", "x=%ed%a0%80", "x=%00", "%00=1", "id=%ff&name=%ff",
    "all_tenants=1&all_tenants=%ff&all_tenants=", "is_public=%ff&is_public=true&is_public=",
    "host=%C2%B3&binary=%00&binary=x", "limit=" + "9" * 400 + "&marker=%ff",
    "&".join(["id=a"] * 300), "&&&==&=&", "x", "%", "%%%", "a=%2", "a=%zz",
]
#: (content type, body) pairs sent to every method that is not GET.
HOSTILE_BODIES = [
    ("application/json", b"{"), ("application/json", b"[]"), ("application/json", b"[1, 2]"),
    ("application/json", b'"text"'), ("application/json", b"null"), ("application/json", b"1"),
    ("application/json", b"1e400"), ("application/json", b"NaN"), ("application/json", b"\xff"),
    ("application/json", b'{"a": ' + b"9" * 5000 + b"}"), ("application/json", b"{}"),
    ("application/json", b'{"\\u0000": "\\u0000"}'), ("application/json", b'{"a": "\\ud800"}'),
    ("application/json", b"\xef\xbb\xbf{}"), ("application/json", b"[" * 40 + b"]" * 40),
    ("application/xml", b"<a/>"), ("application/json; charset=latin-1", b'{"a": "\xe9"}'),
    ("multipart/form-data; boundary=x", b"--x--"), ("text/plain", b"\x00\x01"),
    ("", b'{"aggregate": null, "flavor": [], "extra_specs": 1, "cache": "x"}'),
]
#: Microversion headers, well-formed or not.
HOSTILE_HEADERS = [
    {"OpenStack-API-Version": "compute 2.abc"}, {"OpenStack-API-Version": "compute 2."},
    {"OpenStack-API-Version": "compute 2." + "9" * 40}, {"OpenStack-API-Version": "compute"},
    {"OpenStack-API-Version": "compute 1.0"}, {"OpenStack-API-Version": "compute 3.0"},
    {"OpenStack-API-Version": "compute \xb2.1"}, {"OpenStack-API-Version": "compute latest"},
    {"OpenStack-API-Version": "compute 2.1, compute 2.80"}, {"OpenStack-API-Version": ","},
    {"X-OpenStack-Nova-API-Version": "2.1e3"}, {"X-OpenStack-Nova-API-Version": "-2.-1"},
    {"X-OpenStack-Nova-API-Version": "\xff"}, {"Accept": "application/xml"},
    {"Content-Length": "0", "Transfer-Encoding": "chunked"},
]
#: Methods no route declares, plus HEAD (served as GET where GET is declared).
EXTRA_METHODS = ["HEAD", "PATCH", "OPTIONS"]
_PLACEHOLDER = re.compile(r"\{[a-z_]+\}")


class Walk:
    """The application with one object behind each kind of placeholder, and the failures seen."""

    def __init__(self, app: webtest.TestApp, db: Database) -> None:
        self.app = app
        self.failures: list[str] = []
        aggregate = create_aggregate(app)
        app.post_json(f"/v2.1/os-aggregates/{aggregate['id']}/action",
                      {"add_host": {"host": "c1"}}, headers=LATEST)
        flavor = app.post_json("/v2.1/flavors", {"flavor": {
            "name": "f1", "id": "f1", "ram": 512, "vcpus": 1, "disk": 1}}, headers=LATEST)
        app.post_json("/v2.1/flavors/f1/os-extra_specs",
                      {"extra_specs": {"hw:cpu_policy": "shared"}}, headers=LATEST)
        self.real = {
            "{aggregate_id}": str(aggregate["id"]), "{flavor_id}": flavor.json["flavor"]["id"],
            "{flavor_extra_spec_key}": "hw:cpu_policy", "{host}": "c1", "{network_id}": "none",
            "{server_id}": "a0b1c2d3-0000-4000-8000-000000000001",
            "{job_id}": "a0b1c2d3-0000-4000-8000-000000000002",
            "{image_id}": "a0b1c2d3-0000-4000-8000-000000000003",
            "{alias}": "os-hypervisors", "{project_id}": MEMBER["X-Project-Id"], "{key}": "k",
            # LATEST: a hypervisor is its compute's uuid
            "{hypervisor_id}": db_services.service_get(db, "c1", "fleetcache-compute")["uuid"],
            "{hypervisor_hostname_pattern}": "c",
        }

    def real_path(self, template: str) -> str:
        return _PLACEHOLDER.sub(lambda match: self.real[match.group(0)], template)

    def send(self, method: str, path: str, body: bytes = b"",
             headers: dict[str, str] | None = None) -> None:
        for identity in ({}, MEMBER):
            response = self.app.request(path, method=method, body=body,
                                        headers={**LATEST, **identity, **(headers or {})},
                                        expect_errors=True)
            if response.status_int >= 500:
                who = "member" if identity else "admin"
                self.failures.append(f"{method} {path[:120]} ({who}, {headers}, {body[:60]!r})"
                                     f" -> {response.status}")


def _methods(targets: dict[str, object]) -> list[str]:
    """Declared methods, DELETE last (it removes the object the others are sent to)."""
    return sorted([*targets, *EXTRA_METHODS], key=lambda method: method == "DELETE")


@pytest.fixture
def walk(app: webtest.TestApp, db: Database, computes: list[str]) -> Iterator[Walk]:
    walker = Walk(app, db)
    yield walker
    assert not walker.failures, f"{len(walker.failures)} 5xx:\n" + "\n".join(walker.failures)
    # The application still serves ordinary requests after all that.
    assert app.get("/v2.1", status=200).json["version"]["id"] == "v2.1"
    app.get("/v2.1/os-aggregates", headers=LATEST, status=200)
    app.get("/v2.1/flavors/detail", headers=LATEST, status=200)


def test_hostile_path_segments_on_every_route(walk: Walk) -> None:
    for template, targets in routes.ROUTE_DECLARATIONS.items():
        if not _PLACEHOLDER.search(template):
            continue
        for segment in HOSTILE_SEGMENTS:
            path = _PLACEHOLDER.sub(segment, template)
            for method in _methods(targets):
                walk.send(method, path, b"{}" if method in ("POST", "PUT") else b"")


def test_hostile_queries_on_every_route(walk: Walk) -> None:
    for template, targets in routes.ROUTE_DECLARATIONS.items():
        for query in HOSTILE_QUERIES:
            for method in _methods(targets):
                walk.send(method, f"{walk.real_path(template)}?{query}")


def test_a_query_that_is_not_utf8_is_novas_400(app: webtest.TestApp) -> None:
    for path in ("/v2.1/servers", "/v2.1/flavors", "/v2.1/images", "/v2.1/os-services",
                 "/v2.1/networks", "/v2.1"):
        for query in ("x=%ff", "%ff=1", "x=a%00"):
            response = app.get(f"{path}?{query}", headers=LATEST, expect_errors=True)
            assert response.status_int == 400, (path, query, response.body[:200])
            assert response.json["badRequest"]["code"] == 400
            assert response.headers["X-Compute-Request-Id"].startswith("req-")


def test_hostile_bodies_on_every_route(walk: Walk) -> None:
    for template, targets in routes.ROUTE_DECLARATIONS.items():
        for content_type, body in HOSTILE_BODIES:
            for method in _methods(targets):
                if method in ("GET", "HEAD"):
                    continue
                walk.send(method, walk.real_path(template), body,
                          {"Content-Type": content_type})


def test_hostile_headers_on_every_route(walk: Walk) -> None:
    for template, targets in routes.ROUTE_DECLARATIONS.items():
        for headers in HOSTILE_HEADERS:
            for method in _methods(targets):
                body = b"{}" if method in ("POST", "PUT") else b""
                walk.send(method, walk.real_path(template), body, headers)
