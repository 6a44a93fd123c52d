"""``GET /extensions``: Nova's legacy extension list, empty.

Microversions replaced extensions in v2.1; Nova still answers the route for old clients (and
Tempest's ``test_extensions`` reads it). fleetcache has no extension in that sense, so the
list is empty (``{"extensions": []}``) and any alias is 404, which is what a client that looks
for one must handle anyway.
"""

from __future__ import annotations

import webob
import webob.exc

from fleetcache.api import policy, util
from fleetcache.api.policies import extensions as policies


def list_extensions(req: webob.Request) -> webob.Response:
    """List the API extensions (none)."""
    policy.authorize(util.get_state(req).enforcer, util.get_context(req), policies.LIST)
    return util.json_response({"extensions": []})


def get_extension(req: webob.Request) -> webob.Response:
    """Show an extension by alias (there is none: 404)."""
    policy.authorize(util.get_state(req).enforcer, util.get_context(req), policies.LIST)
    raise webob.exc.HTTPNotFound(explanation="The resource could not be found.")
