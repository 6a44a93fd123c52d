"""``GET /openapi.json``: the OpenAPI 3.1 document of the routes served (no authentication)."""

from __future__ import annotations

import webob

from fleetcache.api import util


def get_openapi(req: webob.Request) -> webob.Response:
    """Show the OpenAPI document of this API."""
    from fleetcache.api import openapi  # built from the route table, which imports this module

    return util.json_response(openapi.build_document(util.base_url(req)))
