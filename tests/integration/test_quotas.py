"""Quotas on the real stack: Keystone's unified limits (registered by ``tools/stack.sh``, a
project limit set with the unmodified ``openstack limit create``), read by the API with
oslo.limit, enforced on ``POST /servers`` and shown by ``openstack limits show --absolute``
and ``openstack quota show``.

Each test works in a project of its own, made here with a member user, so that it meets the
stack's registered defaults (the shared demo project has no limit: other tests boot
whole-host flavors in it).
"""

from __future__ import annotations

import json
import secrets
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.integration.boot import flavor
from tests.integration.conftest import CLI_TIMEOUT, VENV_BIN, Stack
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

#: tools/keystone/stack-keystone.bash's COMPUTE_REGISTERED_LIMITS, as Keystone holds them.
REGISTERED = {"servers": 10, "class:VCPU": 20, "class:MEMORY_MB": 51200, "class:DISK_GB": 20,
              "server_metadata_items": 128}


class Project:
    """A Keystone project with a member user, and what the test made in it."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.keystone = stack.admin_http
        self.auth_url = stack.users["admin"]["OS_AUTH_URL"].rstrip("/")
        self.name = f"it-quota-{uuid.uuid4().hex[:8]}"
        self.password = secrets.token_urlsafe(16)
        self.id = self._post("projects", "project", {"name": self.name, "domain_id": "default"})
        self.user_id = self._post("users", "user", {
            "name": self.name, "password": self.password, "domain_id": "default",
            "default_project_id": self.id})
        roles = self.keystone.get(f"{self.auth_url}/roles?name=member", timeout=30).json()
        role_id = roles["roles"][0]["id"]
        self.keystone.put(f"{self.auth_url}/projects/{self.id}/users/{self.user_id}/roles/"
                          f"{role_id}", timeout=30).raise_for_status()
        self.servers: list[str] = []

    def _post(self, collection: str, member: str, body: dict[str, Any]) -> str:
        resp = self.keystone.post(f"{self.auth_url}/{collection}", json={member: body},
                                  timeout=30)
        resp.raise_for_status()
        return str(resp.json()[member]["id"])

    def env(self) -> dict[str, str]:
        """The member's ``OS_*`` for the ``openstack`` client."""
        return {**self.stack.process_env("member"), "OS_USERNAME": self.name,
                "OS_PASSWORD": self.password, "OS_PROJECT_NAME": self.name}

    def openstack(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The unmodified client as the project's member; exits 0."""
        proc = subprocess.run([str(VENV_BIN / "openstack"), *args], env=self.env(),
                              capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
        return proc

    def limit(self, resource: str, value: int) -> None:
        """The project's own limit, set by the admin with the unmodified client as an operator
        would (in the registered limit's region: Keystone refuses a limit that has none)."""
        self.stack.run_openstack(
            "limit", "create", "--project", self.id, "--service", "compute", "--region",
            self.stack.users["admin"]["OS_REGION_NAME"], "--resource-limit", str(value),
            resource)

    def create_server(self, flavor_name: str, **extra: Any) -> requests.Response:
        """``POST /servers`` as the project's member (raw HTTP, so a refusal is seen as
        it is)."""
        member_token = requests.post(f"{self.auth_url}/auth/tokens", timeout=30, json={
            "auth": {"identity": {"methods": ["password"], "password": {"user": {
                "id": self.user_id, "password": self.password}}},
                "scope": {"project": {"id": self.id}}}}).headers["X-Subject-Token"]
        flavors = self.stack.api_request("GET", "flavors").json()["flavors"]
        flavor_id = next(f["id"] for f in flavors if f["name"] == flavor_name)
        resp = self.stack.api_request(
            "POST", "servers", token=member_token, microversion="2.81", json={"server": {
                "name": f"{self.name}-vm", "imageRef": self.stack.sample_images[1],
                "flavorRef": flavor_id, "networks": "none", **extra}})
        if resp.status_code == 202:
            self.servers += self._ids(member_token, resp)
        return resp

    def _ids(self, token: str, resp: requests.Response) -> list[str]:
        listed = self.stack.api_request("GET", "servers", token=token).json()["servers"]
        return [s["id"] for s in listed if s["id"] not in self.servers]

    def purge(self) -> None:
        for server in self.servers:
            self.stack.api_request("DELETE", f"servers/{server}")
        for server in self.servers:
            wait_for(lambda s=server: self.stack.api_request(  # type: ignore[misc]
                "GET", f"servers/{s}").status_code == 404, f"server {server} gone", 120)
        limits = self.keystone.get(f"{self.auth_url}/limits?project_id={self.id}",
                                   timeout=30).json()["limits"]
        for limit in limits:
            self.keystone.delete(f"{self.auth_url}/limits/{limit['id']}", timeout=30)
        self.keystone.delete(f"{self.auth_url}/users/{self.user_id}", timeout=30)
        self.keystone.delete(f"{self.auth_url}/projects/{self.id}", timeout=30)


@pytest.fixture
def project(stack: Stack) -> Iterator[Project]:
    made = Project(stack)
    try:
        yield made
    finally:
        made.purge()


def _absolute(project: Project) -> dict[str, int]:
    """``openstack limits show --absolute`` of the project's member, as printed (openstacksdk's
    names: ``instances`` is ``maxTotalInstances``, ``instances_used``
    ``totalInstancesUsed``...)."""
    rows = json.loads(project.openstack("limits", "show", "--absolute", "-f", "json").stdout)
    return {row["Name"]: row["Value"] for row in rows}


def test_the_stack_registers_novas_limits_in_keystone(stack: Stack) -> None:
    listed = stack.openstack_json("registered", "limit", "list", "--service", "compute")
    found = {row["Resource Name"]: row["Default Limit"] for row in listed}
    assert {name: found.get(name) for name in REGISTERED} == REGISTERED


def test_over_the_quota_is_novas_403_under_it_succeeds(stack: Stack,
                                                        project: Project) -> None:
    with flavor(stack, vcpus=1, ram=64, disk=1) as small:
        assert _absolute(project)["instances"] == REGISTERED["servers"]
        # The admin sets the project's own limit, as an operator would.
        project.limit("servers", 2)
        assert _absolute(project)["instances"] == 2

        first = project.create_server(small)
        assert first.status_code == 202, first.text
        server = first.json()["server"]["id"]
        wait_for(lambda: stack.api_request("GET", f"servers/{server}").json()["server"][
            "status"] == "ACTIVE", "the first server to be ACTIVE", 120)
        assert project.create_server(small).status_code == 202
        refused = project.create_server(small)
        assert refused.status_code == 403, refused.text
        assert refused.json()["forbidden"]["message"] == (
            "Quota exceeded for instances: Requested 1, but already used 2 of 2 instances")
        assert len(project.servers) == 2
        absolute = _absolute(project)
        assert (absolute["instances_used"], absolute["total_cores_used"],
                absolute["total_ram_used"], absolute["server_meta"]) == (
                    2, 2, 128, REGISTERED["server_metadata_items"])


def test_a_flavor_over_the_cores_quota_is_refused(stack: Stack, project: Project) -> None:
    with flavor(stack, vcpus=REGISTERED["class:VCPU"] + 1, ram=64, disk=1) as wide:
        refused = project.create_server(wide)
    assert refused.status_code == 403, refused.text
    assert refused.json()["forbidden"]["message"] == (
        "Quota exceeded for cores: Requested 21, but already used 0 of 20 cores")
    assert project.servers == []


def test_multiple_create_makes_what_the_quota_allows(stack: Stack, project: Project) -> None:
    project.limit("servers", 3)
    with flavor(stack, vcpus=1, ram=64, disk=1) as small:
        made = project.create_server(small, min_count=1, max_count=1000)
        assert made.status_code == 202, made.text
        assert len(project.servers) == 3
        refused = project.create_server(small, min_count=1, max_count=2)
    assert refused.status_code == 403


def test_openstack_quota_show_prints_the_projects_limits(stack: Stack,
                                                         project: Project) -> None:
    project.limit("class:VCPU", 7)
    shown = json.loads(project.openstack("quota", "show", "--compute", "-f", "json",
                                         project.id).stdout)
    rows = {row["Resource"]: row["Limit"] for row in shown} if isinstance(shown, list) \
        else shown
    assert rows["cores"] == 7
    assert rows["instances"] == REGISTERED["servers"]
    assert rows["ram"] == REGISTERED["class:MEMORY_MB"]
