"""Every route as every role (noauth headers, the default policies): the matrix
``docs/api.md`` prints, and what it must say (Nova's defaults: admin-only aggregate and
pre-cache routes, project-owned servers, flavors readable by anyone)."""

from __future__ import annotations

import io
import pathlib
import re
from typing import Any

import pytest
import webtest
from oslo_config import cfg

from fleetcache.common import instance_states
from fleetcache.common.db import instances
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from fleetcache.image import local
from tests import policy_matrix
from tests.functional.api.helpers import LATEST, StubConductorAPI, create_aggregate

DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "api.md"
#: role -> the noauth identity headers of that persona (project p1; "other": project p2).
PERSONAS = {
    "reader": {"X-Roles": "reader", "X-User-Id": "u-reader", "X-Project-Id": "p1"},
    "member": {"X-Roles": "member,reader", "X-User-Id": "u-member", "X-Project-Id": "p1"},
    "other": {"X-Roles": "member,reader", "X-User-Id": "u-other", "X-Project-Id": "p2"},
    "admin": {"X-Roles": "admin,member,reader", "X-User-Id": "u-admin", "X-Project-Id": "p0"},
}
ROLES = list(PERSONAS)


@pytest.fixture
def image(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> str:
    directory = tmp_path / "images"
    directory.mkdir()
    conf.set_override("backend", "local", group="image_source")
    conf.set_override("local_directory", str(directory), group="image_source")
    return local.add_image(str(directory), io.BytesIO(b"x" * 10), name="cirros").id


def _flavor(app: webtest.TestApp, name: str, public: bool = True) -> str:
    body = {"flavor": {"name": name, "ram": 64, "vcpus": 1, "disk": 1,
                       "os-flavor-access:is_public": public}}
    return str(app.post_json("/v2.1/flavors", body).json["flavor"]["id"])


def _members_server(app: webtest.TestApp, image: str, flavor: str, name: str) -> str:
    body = {"server": {"name": name, "imageRef": image, "flavorRef": flavor,
                       "networks": "none", "metadata": policy_matrix.SERVER_METADATA}}
    headers = {**PERSONAS["member"], **LATEST}
    return str(app.post_json("/v2.1/servers", body, headers=headers).json["server"]["id"])


def _matrix(app: webtest.TestApp, db: Database, image: str,
            host: str) -> policy_matrix.Matrix:
    agg = create_aggregate(app, "matrix")
    victim = create_aggregate(app, "matrix-victim")
    location = app.post_json(f"/v2.1/os-aggregates/{agg['id']}/images",
                             {"cache": [{"id": image}]}, headers=LATEST).headers["Location"]
    flavor = _flavor(app, "matrix")
    app.post_json(f"/v2.1/flavors/{flavor}/os-extra_specs",
                  {"extra_specs": {policy_matrix.SPEC: "1"}})
    servers = {role: _members_server(app, image, flavor, f"matrix-{role}")
               for role in ("server", *ROLES)}
    # As on the stack, where the matrix's flavor fits no host: the server the actions act on
    # ended its build in ERROR, so stop and start answer by that state, not by a build.
    instances.instance_update(db, servers["server"],
                              {"vm_state": instance_states.ERROR, "task_state": None})

    def send(role: str | None, method: str, path: str, body: Any,
             microversion: str | None) -> policy_matrix.Answer:
        headers = dict(PERSONAS[role]) if role else {}
        if microversion:
            headers["OpenStack-API-Version"] = f"compute {microversion}"
        resp = app.request(path, method=method, headers=headers, expect_errors=True,
                           **({"json": body} if body is not None else {}))
        json_body = resp.content_type == "application/json" and resp.body
        return resp.status_int, resp.json if json_body else None

    ids = {"agg": str(agg["id"]), "victim": str(victim["id"]), "job": location.rsplit("/", 1)[1],
           "image": image, "host": host, "prefix": "matrix", "flavor": flavor,
           "flavor_victim": _flavor(app, "matrix-victim"), "server": servers.pop("server"),
           "server_victim": servers,
           "hypervisor": db_services.service_get(db, host, "fleetcache-compute")["uuid"],
           "private_flavor": _flavor(app, "matrix-private", public=False),
           "project": PERSONAS["member"]["X-Project-Id"]}
    return policy_matrix.run(send, ROLES, ids)


def test_matrix_is_nova_policy_and_docs_print_it(
    app: webtest.TestApp, db: Database, conductor: StubConductorAPI, computes: list[str],
    image: str,
) -> None:
    matrix = _matrix(app, db, image, computes[0])
    table = matrix.render()
    print("\n" + table)
    assert policy_matrix.check(matrix) == []
    doc = DOC.read_text()
    found = re.search(r"<!-- policy-matrix -->\n(.*?)\n<!-- /policy-matrix -->", doc, re.S)
    assert found, "docs/api.md has no <!-- policy-matrix --> block"
    assert found.group(1) == table, (
        "docs/api.md's policy matrix is out of date; paste this test's printed table:\n" + table)


def test_every_route_has_a_probe(app: webtest.TestApp) -> None:
    """A route added without a probe would be missing from the matrix."""
    from fleetcache.api import routes

    probed = {(p.method, re.sub(r"\{[^}]+\}", "{}", p.path.split("?")[0]))
              for p in policy_matrix.PROBES}
    for path, methods in routes.ROUTE_DECLARATIONS.items():
        for method in methods:
            key = (method, re.sub(r"\{[^}]+\}", "{}", path).rstrip("/") or "/")
            assert key in probed, f"{method} {path} has no probe in tests/policy_matrix.py"
