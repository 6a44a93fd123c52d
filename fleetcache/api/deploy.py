"""Assembles the API's middleware pipeline around the router, in one readable function."""

from __future__ import annotations

from typing import Any

from oslo_config import cfg

from fleetcache.api import (
    fault,
    guard,
    microversion,
    middleware,
    paths,
    policy,
    router,
    routes,
    status_auth,
)
from fleetcache.api.state import ApiState, CacheImagesAPI, HostUptimeAPI
from fleetcache.common.db.session import Database


def deploy(conf: cfg.ConfigOpts, conductor_api: CacheImagesAPI | None = None,
           compute_api: HostUptimeAPI | None = None) -> Any:
    """The WSGI application for ``conf``, outermost middleware first::

        request id -> request log -> fault wrapper -> body size limit -> request guard
        -> status page token -> [keystone auth_token] -> context -> microversion -> router
        -> handler

    The size limit and the guard come before authentication, as Nova's ``sizelimit`` does:
    nothing reads a body, a token or a path before they have been checked. The status page's
    token step (:mod:`~fleetcache.api.status_auth`) lets a browser sign in to ``/status``.

    ``[api] auth_strategy = noauth`` drops ``auth_token`` and gives a request without
    ``X-Roles`` the roles of ``[api] noauth_default_roles`` (labs and tests only).
    ``conductor_api`` and ``compute_api`` replace the conductor and compute RPC clients (fast
    tests only).
    """
    state = ApiState(conf, Database.from_conf(conf), policy.get_enforcer(conf), conductor_api,
                     compute_api)
    noauth = conf.api.auth_strategy == "noauth"

    application: Any = router.Router(routes.ROUTE_DECLARATIONS)
    application = microversion.MicroversionMiddleware(application)
    application = middleware.ContextMiddleware(
        application, state, default_roles=list(conf.api.noauth_default_roles) if noauth else None
    )
    if not noauth:
        application = middleware.KeystoneAuth(
            application, {"oslo_config_config": conf}, public_paths=paths.PUBLIC_PATHS
        )
    application = status_auth.StatusTokenCookie(application)
    application = guard.RequestGuard(application)
    application = guard.BodySizeLimit(application, conf)
    application = fault.FaultWrapper(application)
    application = middleware.RequestLog(application)
    application = middleware.ComputeRequestId(application)
    return application
