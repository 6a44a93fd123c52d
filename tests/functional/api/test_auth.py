"""noauth roles, and the keystone pipeline (auth_token in front, discovery left public)."""

from __future__ import annotations

import webtest
from oslo_config import cfg

from fleetcache.api import middleware, wsgi
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import fault


def test_noauth_request_without_roles_gets_default_roles(app: webtest.TestApp) -> None:
    assert app.get("/v2.1/os-aggregates").status_int == 200


def test_noauth_roles_header_is_honoured(app: webtest.TestApp) -> None:
    assert app.get("/v2.1/os-aggregates", headers={"X-Roles": "admin"}).status_int == 200
    fault(app.get("/v2.1/os-aggregates", headers={"X-Roles": "reader"}, expect_errors=True),
          "forbidden", 403)


def test_noauth_default_roles_option(conf: cfg.ConfigOpts, db: Database) -> None:
    conf.set_override("noauth_default_roles", ["member"], group="api")
    app = webtest.TestApp(wsgi.init_application(conf))
    fault(app.get("/v2.1/os-aggregates", expect_errors=True), "forbidden", 403)


def test_keystone_mode_needs_a_token_but_not_for_discovery(
    conf: cfg.ConfigOpts, db: Database
) -> None:
    conf.set_override("auth_strategy", "keystone", group="api")
    middleware.register_keystone_opts(conf)
    # Never contacted: a request without a token is refused before any look-up.
    conf.set_override("www_authenticate_uri", "http://127.0.0.1:9/identity",
                      group="keystone_authtoken")
    app = webtest.TestApp(wsgi.init_application(conf))
    denied = app.get("/v2.1/os-aggregates", headers={"X-Roles": "admin"}, expect_errors=True)
    assert denied.status_int == 401
    assert denied.headers["WWW-Authenticate"] == 'Keystone uri="http://127.0.0.1:9/identity"'
    assert denied.headers["X-Compute-Request-Id"]
    assert app.get("/").status_int == 200
    assert app.get("/v2.1/").json["version"]["version"] == "2.81"
    assert app.get("/openapi.json").status_int == 200


def test_keystone_mode_status_page_without_token_is_the_sign_in_form(
    conf: cfg.ConfigOpts, db: Database
) -> None:
    """The whole pipeline: the fault wrapper lets the sign-in page (a 401 in HTML) through;
    the feed the page polls stays JSON."""
    conf.set_override("auth_strategy", "keystone", group="api")
    middleware.register_keystone_opts(conf)
    conf.set_override("www_authenticate_uri", "http://127.0.0.1:9/identity",
                      group="keystone_authtoken")
    app = webtest.TestApp(wsgi.init_application(conf))
    page = app.get("/status", expect_errors=True)
    assert page.status_int == 401 and page.content_type == "text/html"
    assert 'id="token"' in page.text
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    assert page.headers["WWW-Authenticate"] == 'Keystone uri="http://127.0.0.1:9/identity"'
    feed = app.get("/status/progress", expect_errors=True)
    assert feed.status_int == 401 and feed.content_type == "application/json"
