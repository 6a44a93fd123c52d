"""How a browser reaches the admin-only status page, with Keystone or without.

A link cannot carry ``X-Auth-Token``, so the status paths (and only they) accept a token in
other ways, all ending as that header before ``auth_token`` reads it:

* ``noauth`` (labs, the embedded demo): the page loads as any request does (the roles of
  ``[api] noauth_default_roles``).
* a reverse proxy in front of the API that adds ``X-Auth-Token`` (a header from the proxy
  wins over everything below);
* the sign-in form: a browser whose request ``auth_token`` refuses (401) gets, instead of
  the JSON fault, a page with a field to paste a Keystone token into; its script keeps the
  token in the cookie :data:`~fleetcache.api.status_html.TOKEN_COOKIE` and reloads, and
  :class:`StatusTokenCookie` turns that cookie into ``X-Auth-Token``.

Why a cookie is safe here: it is honoured for ``GET``/``HEAD`` of the status paths only, which
change nothing (no request forgery can act through it), it is ``SameSite=Strict`` and scoped
to the page's path, and the page forbids framing and every script but its own (its
Content-Security-Policy), which leaves an injected script no way to read it.
"""

from __future__ import annotations

import webob

from fleetcache.api import fault, status_html, util
from fleetcache.api.middleware import normalize_path
from fleetcache.api.paths import STATUS, STATUS_PATHS

_READS = ("GET", "HEAD")


class StatusTokenCookie(util.Middleware):
    """Outside ``auth_token``: the sign-in cookie becomes ``X-Auth-Token`` on the status paths,
    and a refused request for the page gets the sign-in form."""

    def process(self, req: webob.Request) -> webob.Response:
        path = normalize_path(req.path_info)
        if path not in STATUS_PATHS or req.method not in _READS:
            return self.forward(req)
        token = req.cookies.get(status_html.TOKEN_COOKIE)
        if token and "X-Auth-Token" not in req.headers:
            req.headers["X-Auth-Token"] = token
        response = self.forward(req)
        if response.status_code != 401 or path != STATUS:
            return response
        message = ("The token was refused (expired?): paste a new one." if token
                   else "The status page is for administrators: paste a Keystone token.")
        page = webob.Response(status=401, content_type="text/html", charset="UTF-8")
        page.headers.update(status_html.HEADERS)
        page.text = status_html.render_sign_in(req.script_name + STATUS, message)
        if "WWW-Authenticate" in response.headers:
            page.headers["WWW-Authenticate"] = response.headers["WWW-Authenticate"]
        req.environ[fault.KEEP_ERROR_PAGE] = True  # a page, not a JSON fault
        return page
