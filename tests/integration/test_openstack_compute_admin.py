"""The unmodified ``openstack`` client's hypervisor and flavor access commands on the real stack
(Keystone, the API behind nginx, the conductor, computes in two cells on RabbitMQ), checked
against the stack's database."""

from __future__ import annotations

import ipaddress
import re

import pytest

from fleetcache.common.db import flavors as db_flavors

pytestmark = pytest.mark.integration


def test_hypervisor_list_and_show_answer_each_computes_address_and_uptime(stack):
    listed = stack.openstack_json("hypervisor", "list")
    assert sorted(h["Hypervisor Hostname"] for h in listed) == sorted(stack.computes)
    for host in stack.computes:
        shown = stack.openstack_json("hypervisor", "show", host)
        service = stack.service(host)
        assert shown["hypervisor_hostname"] == host and shown["state"] == "up"
        # The compute's [DEFAULT] my_ip, as it registered it.
        assert shown["host_ip"] == service["host_ip"]
        ipaddress.ip_address(shown["host_ip"])
        assert shown["id"] == service["uuid"]
        # The client splits the compute's uptime(1) text into these.
        assert re.fullmatch(r"\d\d:\d\d:\d\d", shown["host_time"])
        assert shown["users"].strip().isdigit()
        assert re.fullmatch(r"[\d.]+, [\d.]+, [\d.]+", shown["load_average"])
        assert shown["uptime"]


def test_hypervisor_stats_add_up_the_computes(stack):
    stats = stack.openstack_json("hypervisor", "stats", "show")
    assert stats["count"] == len(stack.computes)
    shown = [stack.openstack_json("hypervisor", "show", host) for host in stack.computes]
    assert stats["vcpus"] == sum(int(h["vcpus"]) for h in shown)
    assert stats["memory_mb"] == sum(int(h["memory_mb"]) for h in shown)


def test_hypervisor_routes_are_admin_only(stack):
    compute1 = stack.service("compute1")
    for path in ("os-hypervisors/statistics", f"os-hypervisors/{compute1['id']}",
                 f"os-hypervisors/{compute1['id']}/uptime", "os-hypervisors/compute1/search"):
        resp = stack.api_request("GET", path, user="member")
        assert resp.status_code == 403, resp.text


def test_flavor_set_project_shares_a_private_flavor(stack, aggregate_name):
    name = f"{aggregate_name}-private"
    flavor = stack.openstack_json("flavor", "create", "--private", "--ram", "64", "--disk", "1",
                                  "--vcpus", "1", name)
    project = stack.keystone_session("member").get_project_id()

    def members_flavors() -> list[str]:
        return [f["Name"] for f in stack.openstack_json("flavor", "list", user="member")]

    try:
        assert name not in members_flavors()
        stack.run_openstack("flavor", "set", "--project", project, name)
        assert db_flavors.flavor_projects(stack.db, flavor["id"]) == [project]
        assert stack.openstack_json("flavor", "show", name)["access_project_ids"] == [project]
        assert name in members_flavors()
        assert stack.openstack_json("flavor", "show", name, user="member")["id"] == flavor["id"]
        # Granting twice: Nova's 409.
        proc = stack.run_openstack("flavor", "set", "--project", project, name, check=False)
        assert proc.returncode != 0 and "409" in proc.stderr

        stack.run_openstack("flavor", "unset", "--project", project, name)
        assert db_flavors.flavor_projects(stack.db, flavor["id"]) == []
        assert name not in members_flavors()
    finally:
        stack.run_openstack("flavor", "delete", name)


def test_flavor_access_to_a_project_keystone_does_not_know_is_400(stack, aggregate_name):
    flavor = stack.openstack_json("flavor", "create", "--private", "--ram", "64", "--disk", "1",
                                  "--vcpus", "1", f"{aggregate_name}-private")
    try:
        resp = stack.api_request("POST", f"flavors/{flavor['id']}/action",
                                 json={"addTenantAccess": {"tenant": "0" * 32}})
        assert resp.status_code == 400, resp.text
        assert "is not a valid project" in resp.json()["badRequest"]["message"]
        assert db_flavors.flavor_projects(stack.db, flavor["id"]) == []
    finally:
        stack.run_openstack("flavor", "delete", flavor["id"])
