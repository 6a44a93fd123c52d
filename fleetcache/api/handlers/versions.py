"""Version discovery: ``GET /`` and ``GET /v2.1`` (no authentication, as in Nova).

The documents follow Nova's, which both ``openstack`` (openstacksdk needs ``status`` and a
``self`` link) and ``nova`` (needs ``version`` and ``min_version``) accept.
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


def _version(req: webob.Request) -> dict[str, Any]:
    return {
        "id": VERSION_ID,
        "status": "CURRENT",
        "version": str(microversion.MAX_VERSION),
        "min_version": str(microversion.MIN_VERSION),
        "updated": UPDATED,
        "links": [{"rel": "self", "href": f"{util.base_url(req)}/{VERSION_ID}/"}],
    }


def list_versions(req: webob.Request) -> webob.Response:
    """List the API versions (only v2.1, with its microversion range)."""
    return util.json_response({"versions": [_version(req)]})


def get_version(req: webob.Request) -> webob.Response:
    """Show the v2.1 API and its microversion range."""
    version = _version(req)
    version["media-types"] = MEDIA_TYPES
    return util.json_response({"version": version})
