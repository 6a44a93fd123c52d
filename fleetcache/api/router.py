"""The router: dispatches a request to the handler a route table declares for it.

A route table (``routes.ROUTE_DECLARATIONS``) maps each path to ``{method: handler}``; a path
that matches with an unlisted method is a 405 with ``Allow``, a path that does not match is a
404. Trailing slashes are ignored. Handlers take a ``webob.Request`` and return a
``webob.Response``; the errors they raise become Nova fault bodies here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import routes
import webob
import webob.exc

from fleetcache.api import fault, middleware
from fleetcache.common import exception

Handler = Callable[[webob.Request], webob.Response]
RouteTable = Mapping[str, Mapping[str, Handler]]


def make_map(declarations: RouteTable) -> routes.Mapper:
    mapper = routes.Mapper()
    for path in declarations:
        # Routes turns extra values into strings: keep only the key of the declaration.
        mapper.connect(path, route_key=path)
    return mapper


class Router:
    """Dispatches a request to the handler its path and method declare."""

    def __init__(self, declarations: RouteTable) -> None:
        self.declarations = declarations
        self.mapper = make_map(self.declarations)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        req = webob.Request(environ)
        try:
            response = self._dispatch(req)
        except exception.FleetcacheException as exc:
            response = fault.fault_response(exc.code, exc.message, exc.error_code)
        except webob.exc.HTTPException as exc:
            response = fault.from_http_error(exc)
        result: Iterable[bytes] = response(environ, start_response)
        return result

    def _dispatch(self, req: webob.Request) -> webob.Response:
        match = self.mapper.match(middleware.normalize_path(req.path_info))
        if match is None:
            raise webob.exc.HTTPNotFound(explanation="The resource could not be found.")
        targets = self.declarations[match.pop("route_key")]
        handler = targets.get(req.method)
        if handler is None and req.method == "HEAD":
            handler = targets.get("GET")
        if handler is None:
            error = webob.exc.HTTPMethodNotAllowed(
                explanation=f"The method {req.method} is not allowed for this resource."
            )
            error.headers["Allow"] = ", ".join(sorted(targets))
            raise error
        req.urlvars = match
        return handler(req)
