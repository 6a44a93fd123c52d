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
