"""fleetcache.api.identity: whether a project exists, asked of an identity endpoint (a local
HTTP server standing in for Keystone v3) with the caller's token, as Nova asks."""

from __future__ import annotations

import http.server
import json
import threading
import types
from collections.abc import Iterator
from typing import Any

import pytest
import webob
from keystoneauth1 import access, fixture
from keystoneauth1.identity.access import AccessInfoPlugin
from oslo_config import cfg

from fleetcache.api import identity, middleware, util
from fleetcache.common import exception

#: project id -> the status the fake Keystone answers for it.
ANSWERS = {"p1": 200, "gone": 404, "secret": 403, "broken": 500}


class FakeKeystone(http.server.BaseHTTPRequestHandler):
    """Keystone v3's version document and ``GET /v3/projects/{id}``; records the tokens."""

    tokens: list[str | None] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        base = f"http://127.0.0.1:{self.server.server_address[1]}/v3"
        if self.path.rstrip("/") == "/v3":
            self._send(200, {"version": {"id": "v3.14", "status": "stable",
                                         "links": [{"rel": "self", "href": base + "/"}]}})
            return
        self.tokens.append(self.headers.get("X-Auth-Token"))
        project = self.path.rsplit("/", 1)[-1]
        status = ANSWERS.get(project, 404)
        self._send(status, {"project": {"id": project}} if status == 200 else {})

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def keystone() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeKeystone)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeKeystone.tokens = []
    yield f"http://127.0.0.1:{server.server_address[1]}/v3"
    server.shutdown()
    server.server_close()


def _request(catalog_url: str | None) -> webob.Request:
    """A request as auth_token leaves it: the caller's plugin (its token and catalog)."""
    conf = cfg.ConfigOpts()
    middleware.register_keystone_opts(conf)
    conf([], default_config_files=[])
    req = webob.Request.blank("/")
    req.environ[util.STATE_KEY] = types.SimpleNamespace(conf=conf)
    if catalog_url is not None:
        token = fixture.V3Token()
        token.set_project_scope()
        if catalog_url:
            token.add_service("identity").add_standard_endpoints(
                public=catalog_url, internal=catalog_url)
        plugin = AccessInfoPlugin(access.create(body=token, auth_token="user-token"))
        req.environ[identity.TOKEN_AUTH_KEY] = plugin
    return req


def test_an_existing_project_is_taken_with_the_callers_token(keystone: str) -> None:
    identity.verify_project_id(_request(keystone), "p1")
    assert FakeKeystone.tokens == ["user-token"]


def test_a_project_keystone_does_not_know_is_400_unless_missing_is_ok(keystone: str) -> None:
    with pytest.raises(exception.InvalidInput, match="Project ID gone is not a valid project"):
        identity.verify_project_id(_request(keystone), "gone")
    identity.verify_project_id(_request(keystone), "gone", missing_ok=True)


@pytest.mark.parametrize("project", ["secret", "broken"])
def test_a_project_keystone_will_not_tell_about_is_taken(keystone: str, project: str) -> None:
    identity.verify_project_id(_request(keystone), project)


def test_an_unreachable_keystone_takes_the_project() -> None:
    identity.verify_project_id(_request("http://127.0.0.1:9/v3"), "p1")


def test_a_catalog_without_identity_is_400() -> None:
    with pytest.raises(exception.InvalidInput, match="unable to find Keystone"):
        identity.verify_project_id(_request(""), "p1")


def test_without_auth_token_every_project_is_taken() -> None:
    identity.verify_project_id(_request(None), "anything")
