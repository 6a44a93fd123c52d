"""The API behind the stack's real Keystone: the route x role matrix with real tokens (raw HTTP
and the unmodified ``openstack`` client), and 401 for expired and revoked tokens.

Users (tools/keystone/stack-keystone.bash): ``admin``; ``member`` and ``reader`` of project
fleetcache-demo; ``other``, a member of project fleetcache-other.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from tests import policy_matrix
from tests.integration.conftest import Stack
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
ROLES = ["reader", "member", "other", "no token", "admin"]
#: Seconds keystonemiddleware may keep trusting a token it validated (the stack's
#: [keystone_authtoken] token_cache_time, 10), plus slack for a busy machine.
REVOCATION_WINDOW = 30


def _send(stack: Stack) -> policy_matrix.Send:
    """Raw HTTP to the API's root (the probes' paths start there) with ``role``'s token."""
    root = stack.api_url.removesuffix("/v2.1")

    def send(role: str | None, method: str, path: str, body: Any,
             microversion: str | None) -> policy_matrix.Answer:
        headers = {"X-Auth-Token": stack.token(role)} if role is not None else {}
        if microversion:
            headers["OpenStack-API-Version"] = f"compute {microversion}"
        resp = requests.request(method, root + path, headers=headers, timeout=30,
                                **({"json": body} if body is not None else {}))
        try:
            return resp.status_code, resp.json()
        except ValueError:
            return resp.status_code, None
    return send


#: MiB of RAM no compute of the stack has: the matrix's servers end in ERROR (no valid host)
#: without building anything, and their delete is local.
HUGE_RAM = 4 << 20


def _flavor(stack: Stack, name: str, ram: int = 64, public: bool = True) -> str:
    resp = stack.api_request("POST", "flavors", json={"flavor": {
        "name": name, "ram": ram, "vcpus": 1, "disk": 1, "os-flavor-access:is_public": public}})
    assert resp.status_code == 200, resp.text
    return str(resp.json()["flavor"]["id"])


def _members_server(stack: Stack, flavor: str, name: str) -> str:
    resp = stack.api_request("POST", "servers", user="member", microversion="2.81", json={
        "server": {"name": name, "imageRef": stack.sample_images[1], "flavorRef": flavor,
                   "networks": "none", "metadata": policy_matrix.SERVER_METADATA}})
    assert resp.status_code == 202, resp.text
    return str(resp.json()["server"]["id"])


def _status(stack: Stack, server: str) -> str:
    return str(stack.api_request("GET", f"servers/{server}").json()["server"]["status"])


def _purge(stack: Stack, prefix: str) -> None:
    """Delete what the matrix made (as the admin): aggregates, flavors, servers."""
    for row in stack.api_request("GET", "os-aggregates").json()["aggregates"]:
        if row["name"].startswith(f"{prefix}-new-"):
            stack.purge_aggregate(row["id"])
    for row in stack.api_request("GET", "flavors?is_public=none").json()["flavors"]:
        if row["name"].startswith(prefix):
            stack.api_request("DELETE", f"flavors/{row['id']}")
    for row in stack.api_request("GET", "servers?all_tenants=1").json()["servers"]:
        if row["name"].startswith(prefix):
            stack.api_request("DELETE", f"servers/{row['id']}")


def test_route_role_matrix_with_real_tokens(stack: Stack, make_aggregate: Any,
                                            aggregate_name: str) -> None:
    agg = make_aggregate()
    victim = make_aggregate()
    resp = stack.api_request("POST", f"os-aggregates/{agg['id']}/images", microversion="2.81",
                             json={"cache": [{"id": stack.sample_images[1]}]})
    assert resp.status_code == 202, resp.text
    job = resp.headers["Location"].rsplit("/", 1)[1]
    try:
        flavor = _flavor(stack, f"{aggregate_name}-flavor", ram=HUGE_RAM)
        resp = stack.api_request("POST", f"flavors/{flavor}/os-extra_specs",
                                 json={"extra_specs": {policy_matrix.SPEC: "1"}})
        assert resp.status_code == 200, resp.text
        servers = {role: _members_server(stack, flavor, f"{aggregate_name}-{role}")
                   for role in ("server", *ROLES)}
        # Stop and start answer by the server's state: wait for the one the matrix acts on
        # to end its build (ERROR: no valid host), as the in-process matrix's server is.
        wait_for(lambda: _status(stack, servers["server"]) == "ERROR",
                 "the matrix's server to end in ERROR", 60)
        ids = {"agg": str(agg["id"]), "victim": str(victim["id"]), "job": job,
               "image": stack.sample_images[1], "host": "compute1", "prefix": aggregate_name,
               "flavor": flavor, "flavor_victim": _flavor(stack, f"{aggregate_name}-victim"),
               "server": servers.pop("server"), "server_victim": servers,
               "hypervisor": stack.service("compute1")["uuid"],
               "private_flavor": _flavor(stack, f"{aggregate_name}-private", public=False),
               "project": stack.keystone_session("member").get_project_id()}
        matrix = policy_matrix.run(_send(stack), ROLES, ids)
    finally:
        _purge(stack, aggregate_name)
    print("\n" + matrix.render())
    assert policy_matrix.check(matrix) == []
    # The same statuses as the in-process matrix that docs/api.md prints.
    documented = re.search(r"<!-- policy-matrix -->\n(.*?)\n<!-- /policy-matrix -->",
                           DOC.read_text(), re.S)
    assert documented
    without_no_token = policy_matrix.Matrix(
        [r for r in ROLES if r != "no token"],
        {k: v for k, v in matrix.answers.items() if k[1] != "no token"})
    assert without_no_token.render() == documented.group(1)


#: The unmodified client's commands over the admin-only routes, in the admin's order.
CLIENT_COMMANDS = [
    "aggregate list",
    "aggregate create {name}-cli-{role}",
    "aggregate show {agg}",
    "aggregate set --zone cli-az {agg}",
    "aggregate set --property cli={role} {agg}",
    "aggregate add host {agg} compute1",
    "aggregate remove host {agg} compute1",
    "aggregate cache image {agg} {image}",
    "compute service list",
    "aggregate delete {victim}",
]


def test_openstack_client_matrix(stack: Stack, make_aggregate: Any,
                                 aggregate_name: str) -> None:
    """Every role runs every command; only the admin's succeed, the others print the 403."""
    agg, victim = make_aggregate(), make_aggregate()
    fill = {"agg": str(agg["id"]), "victim": str(victim["id"]),
            "image": stack.sample_images[1], "name": aggregate_name}

    def run(role: str, command: str) -> tuple[str, str, int, str]:
        args = command.format(role=role, **fill).split()
        proc = stack.run_openstack("--os-compute-api-version", "2.81", *args, check=False,
                                   user=role)
        return role, command, proc.returncode, proc.stderr

    jobs = [(role, c) for role in ("reader", "member", "other") for c in CLIENT_COMMANDS]
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(lambda job: run(*job), jobs))
        results += [run("admin", c) for c in CLIENT_COMMANDS]  # in order: delete last
    finally:
        for row in stack.api_request("GET", "os-aggregates").json()["aggregates"]:
            if row["name"].startswith(f"{aggregate_name}-cli-"):
                stack.purge_aggregate(row["id"])
    table = "\n".join(f"{role:7} {command:45} exit {code}" for role, command, code, _ in results)
    print("\n" + table)
    for role, command, code, stderr in results:
        if role == "admin":
            assert code == 0, f"admin: openstack {command}: {stderr}"
        else:
            # openstacksdk: "ForbiddenException: 403: Client Error for url: ..., Policy
            # doesn't allow os_compute_api:os-aggregates:index to be performed."
            assert code != 0 and "403" in stderr, f"{role}: openstack {command}: {stderr}"
            assert "Policy doesn't allow" in stderr, stderr


def test_token_past_its_expiry_gets_401(stack: Stack) -> None:
    """Keystone caps a token at its application credential's ``expires_at``: an admin token
    that lives 20 s works, then gets 401 on every protected route."""
    admin = stack.keystone_session("admin")
    user_id = admin.get_user_id()
    expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=20)
    name = f"it-expiry-{uuid.uuid4().hex[:8]}"
    resp = admin.post(f"{stack.users['admin']['OS_AUTH_URL']}/users/{user_id}/"
                      "application_credentials", json={"application_credential": {
                          "name": name, "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%S")}})
    cred = resp.json()["application_credential"]
    try:
        auth = v3.ApplicationCredential(
            auth_url=stack.users["admin"]["OS_AUTH_URL"],
            application_credential_id=cred["id"],
            application_credential_secret=cred["secret"])
        short = ks_session.Session(auth=auth)
        access = auth.get_access(short)
        token = access.auth_token
        assert token and access.expires, access
        assert access.expires <= expires + datetime.timedelta(seconds=1), access.expires
        assert stack.api_request("GET", "os-aggregates", token=token).status_code == 200
        while datetime.datetime.now(datetime.UTC) < access.expires + datetime.timedelta(
                seconds=1):
            time.sleep(0.5)
        for path in ("os-aggregates", "os-services"):
            denied = stack.api_request("GET", path, token=token)
            assert denied.status_code == 401, denied.text
            assert denied.headers["WWW-Authenticate"].startswith("Keystone uri=")
        assert stack.api_request("GET", "/", token=token).status_code == 200  # discovery
    finally:
        admin.delete(f"{stack.users['admin']['OS_AUTH_URL']}/users/{user_id}/"
                     f"application_credentials/{cred['id']}")


def test_revoked_token_gets_401(stack: Stack) -> None:
    """``openstack token revoke`` (the unmodified client): the API refuses the token within
    keystonemiddleware's cache time."""
    token = stack.new_token("admin")
    assert stack.api_request("GET", "os-aggregates", token=token).status_code == 200
    stack.run_openstack("token", "revoke", token)
    deadline = time.monotonic() + REVOCATION_WINDOW
    while (status := stack.api_request("GET", "os-aggregates", token=token).status_code) == 200:
        assert time.monotonic() < deadline, f"a revoked token still works after " \
                                            f"{REVOCATION_WINDOW}s"
        time.sleep(1)
    assert status == 401
    assert stack.api_request("GET", "os-aggregates").status_code == 200  # the others still work
