"""``GET /openapi.json``: the OpenAPI 3.1 document of the routes served (no authentication).

The handler is made for a route table (``fleetcache.api.routes`` passes its own) rather than
importing it: the table imports this module.
"""

from __future__ import annotations

import webob

from fleetcache.api import openapi, util
from fleetcache.api.router import Handler, RouteTable


def document_handler(declarations: RouteTable) -> Handler:
    """The handler serving the OpenAPI document of ``declarations``."""

    def get_openapi(req: webob.Request) -> webob.Response:
        """Show the OpenAPI document of this API."""
        return util.json_response(openapi.build_document(declarations, util.base_url(req)))

    return get_openapi
