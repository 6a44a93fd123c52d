"""The middlewares of the pipeline ``deploy.deploy`` assembles: request ids, authentication,
the request context and the request log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any

import webob
from keystonemiddleware import auth_token
from oslo_config import cfg
from oslo_log import log as logging
from oslo_middleware import request_id

from fleetcache.api import fault, microversion, policy, util
from fleetcache.api.state import ApiState
from fleetcache.common.context import RequestContext

LOG = logging.getLogger(__name__)

WSGIApp = Callable[..., Any]


class ComputeRequestId(request_id.RequestId):
    """Adds ``X-Compute-Request-Id`` beside ``X-Openstack-Request-Id``, as Nova does.

    novaclient prints the request id only from ``X-Compute-Request-Id``.
    """

    compat_headers = ["X-Compute-Request-Id"]


def register_keystone_opts(conf: cfg.ConfigOpts) -> None:
    """Register ``[keystone_authtoken]`` from keystonemiddleware's own option list, so that
    its values can be read and overridden before the middleware is built."""
    for group, opts in auth_token.list_opts():
        conf.register_opts(opts, group=group)


class KeystoneAuth(auth_token.AuthProtocol):  # type: ignore[misc]
    """keystonemiddleware's ``auth_token``, except on the public (discovery) paths."""

    def __init__(self, app: WSGIApp, conf: dict[str, Any], public_paths: Collection[str]) -> None:
        super().__init__(app, conf)
        self._public_paths = frozenset(public_paths)
        self._public_app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if normalize_path(environ.get("PATH_INFO", "")) in self._public_paths:
            return self._public_app(environ, start_response)
        return super().__call__(environ, start_response)


class ContextMiddleware(util.Middleware):
    """Builds the :class:`RequestContext` from the identity headers into the environ.

    With keystone the headers come from ``auth_token`` (which strips forged ones). In noauth
    mode they are the client's own, and a request without ``X-Roles`` gets ``default_roles``;
    an empty ``X-Roles:`` is a request with no roles, not one without the header.
    """

    def __init__(
        self, application: WSGIApp, state: ApiState, default_roles: list[str] | None = None
    ) -> None:
        super().__init__(application)
        self.state = state
        self.default_roles = default_roles

    def process(self, req: webob.Request) -> webob.Response:
        if self.default_roles is not None and "X-Roles" not in req.headers:
            req.headers["X-Roles"] = ",".join(self.default_roles)
        if req.headers.get("X-Identity-Status", "Confirmed") != "Confirmed":
            return fault.fault_response(401, "Authentication required")
        context = RequestContext.from_environ(req.environ)
        context.is_admin = policy.is_admin(self.state.enforcer, context)
        req.environ[util.CONTEXT_KEY] = context
        req.environ[util.STATE_KEY] = self.state
        return self.forward(req)


class RequestLog(util.Middleware):
    """One INFO line per request: method, path, status, length, microversion and time."""

    def process(self, req: webob.Request) -> webob.Response:
        start = time.monotonic()
        response = self.forward(req)
        LOG.info(
            '%(addr)s "%(method)s %(path)s" status: %(status)s len: %(length)s '
            "microversion: %(version)s time: %(time).4f",
            {
                "addr": req.remote_addr,
                "method": req.method,
                "path": util.request_path(req),
                "status": response.status_code,
                "length": response.content_length,
                "version": req.environ.get(microversion.ENVIRON_KEY, "-"),
                "time": time.monotonic() - start,
            },
        )
        return response


def normalize_path(path: str) -> str:
    """``path`` without its trailing slash (the root stays ``/``)."""
    return path.rstrip("/") or "/"
