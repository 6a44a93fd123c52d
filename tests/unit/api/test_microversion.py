"""Microversion parsing, the canonical list and version-gated handlers."""

from __future__ import annotations

import pytest
import webob
import webob.exc

from fleetcache.api import microversion
from fleetcache.api.microversion import Version


def test_versions_list_is_sorted_and_reaches_281() -> None:
    parsed = [microversion.parse_version_string(v) for v in microversion.VERSIONS]
    assert parsed == sorted(parsed)
    assert microversion.MIN_VERSION == Version(2, 1)
    assert microversion.MAX_VERSION >= Version(2, 81)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, Version(2, 1)),
        ({"OpenStack-API-Version": "compute 2.81"}, Version(2, 81)),
        ({"OpenStack-API-Version": "COMPUTE 2.50"}, Version(2, 50)),
        ({"OpenStack-API-Version": "compute latest"}, microversion.MAX_VERSION),
        ({"X-OpenStack-Nova-API-Version": "2.41"}, Version(2, 41)),
        ({"OpenStack-API-Version": "compute 2.60", "X-OpenStack-Nova-API-Version": "2.2"},
         Version(2, 60)),
    ],
)
def test_extract_version(headers: dict[str, str], expected: Version) -> None:
    assert microversion.extract_version(headers) == expected


def test_out_of_range_is_not_acceptable() -> None:
    with pytest.raises(webob.exc.HTTPNotAcceptable):
        microversion.extract_version({"OpenStack-API-Version": "compute 2.999"})


def test_malformed_is_bad_request() -> None:
    with pytest.raises(webob.exc.HTTPBadRequest):
        microversion.extract_version({"OpenStack-API-Version": "compute 2.x"})


def test_matches_bounds() -> None:
    v = Version(2, 41)
    assert v.matches(Version(2, 41)) and v.matches(None, Version(2, 41))
    assert not v.matches(Version(2, 42)) and not v.matches(None, Version(2, 40))
    assert str(v) == "2.41"


def test_version_handler_hides_route_below_min() -> None:
    @microversion.version_handler("2.81")
    def handler(req: webob.Request) -> webob.Response:
        return webob.Response(status=202)

    req = webob.Request.blank("/")
    with pytest.raises(webob.exc.HTTPNotFound):
        handler(req)
    req.environ[microversion.ENVIRON_KEY] = Version(2, 81)
    assert handler(req).status_int == 202
    assert handler.min_version == Version(2, 81)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"OpenStack-API-Version": "compute 2.81"}, None),
        ({"X-OpenStack-Nova-API-Version": "1.1"}, None),
        ({"OpenStack-API-Version": "compute 2.81, fleetcache 1.1"}, Version(1, 1)),
        ({"OpenStack-API-Version": "fleetcache 1.0"}, Version(1, 0)),
        ({"OpenStack-API-Version": "FleetCache latest"}, microversion.EXTENSION_MAX_VERSION),
    ],
)
def test_extract_extension_version(headers: dict[str, str], expected: Version | None) -> None:
    assert microversion.extract_extension_version(headers) == expected


def test_the_compute_version_ignores_the_fleetcache_axis() -> None:
    headers = {"OpenStack-API-Version": "fleetcache 1.1, compute 2.41"}
    assert microversion.extract_version(headers) == Version(2, 41)
    assert microversion.extract_version({"OpenStack-API-Version": "fleetcache 1.1"}) == (
        microversion.MIN_VERSION)


@pytest.mark.parametrize(("text", "error"), [
    ("1.2", webob.exc.HTTPNotAcceptable), ("2.0", webob.exc.HTTPNotAcceptable),
    ("1.x", webob.exc.HTTPBadRequest), ("1", webob.exc.HTTPBadRequest),
])
def test_a_bad_fleetcache_version_is_refused(text: str, error: type[Exception]) -> None:
    with pytest.raises(error, match="fleetcache|format"):
        microversion.extract_extension_version({"OpenStack-API-Version": f"fleetcache {text}"})


def test_extension_versions_are_sorted_from_1_0_and_the_terms_are_served() -> None:
    parsed = [microversion.parse_version_string(v) for v in microversion.EXTENSION_VERSIONS]
    assert parsed == sorted(parsed) and parsed[0] == Version(1, 0)
    assert microversion.EXTENSION_MAX_VERSION.matches(microversion.EXTENSION_TERMS)
    request = webob.Request.blank("/")
    assert microversion.extension_version(request) == Version(1, 0)
