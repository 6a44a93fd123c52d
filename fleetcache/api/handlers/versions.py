"""Version discovery: ``GET /`` and ``GET /v2.1`` (no authentication, as in Nova).

The documents follow Nova's, which both ``openstack`` (openstacksdk needs ``status`` and a
``self`` link) and ``nova`` (needs ``version`` and ``min_version``) accept. ``GET /`` also
lists the legacy v2.0 entry, as Nova does (nova/api/openstack/compute/versions.py), and its
``self`` link (``/v2/``) answers with that entry, as Tempest's ``test_get_version_details``
follows every listed link. Clients pick v2.1: it is the highest and the one ``CURRENT``.
"""

from __future__ import annotations

from typing import Any

import webob

from fleetcache.api import microversion, util

VERSION_ID = "v2.1"
UPDATED = "2013-07-23T11:33:21Z"
MEDIA_TYPES = [
    {"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}
]
#: Nova's legacy v2.0 entry: no microversions, so ``version`` and ``min_version`` are empty.
LEGACY_ID = "v2.0"
LEGACY_PATH = "v2"
LEGACY_UPDATED = "2025-07-04T12:00:00Z"
LEGACY_MEDIA_TYPES = [
    {"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2"}
]


def _version(req: webob.Request) -> dict[str, Any]:
    return {
        "id": VERSION_ID,
        "status": "CURRENT",
        "version": str(microversion.MAX_VERSION),
        "min_version": str(microversion.MIN_VERSION),
        "updated": UPDATED,
        "links": [{"rel": "self", "href": f"{util.base_url(req)}/{VERSION_ID}/"}],
    }


def _legacy_version(req: webob.Request) -> dict[str, Any]:
    return {
        "id": LEGACY_ID,
        "status": "DEPRECATED",
        "version": "",
        "min_version": "",
        "updated": LEGACY_UPDATED,
        "links": [{"rel": "self", "href": f"{util.base_url(req)}/{LEGACY_PATH}/"}],
    }


def list_versions(req: webob.Request) -> webob.Response:
    """List the API versions: the legacy v2.0 and v2.1 with its microversion range."""
    return util.json_response({"versions": [_legacy_version(req), _version(req)]})


def get_legacy_version(req: webob.Request) -> webob.Response:
    """Show the legacy v2.0 entry (only its document: fleetcache serves no v2.0 API)."""
    version = _legacy_version(req)
    version["media-types"] = LEGACY_MEDIA_TYPES
    return util.json_response({"version": version})


def get_version(req: webob.Request) -> webob.Response:
    """Show the v2.1 API and its microversion range."""
    version = _version(req)
    version["media-types"] = MEDIA_TYPES
    return util.json_response({"version": version})
