"""The boot path on the real stack, driven by the unmodified ``openstack`` client at
microversion 2.81 (``server create --flavor F --image I --nic none --wait``): a server is a
scheduled root disk on a compute, through the backend ``images_type_mapping`` picks, from the
image cache; the state says what is true, Placement holds exactly what exists."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetcache.common.db import host_images
from fleetcache.conductor.placement import provider_uuid
from tests.integration.boot import (
    BUILD_TIMEOUT,
    Images,
    Servers,
    allocations,
    converted,
    eventually,
    flavor,
    host_of,
    placement_get,
)
from tests.integration.conftest import Stack

pytestmark = pytest.mark.integration

QCOW2 = "COMPUTE_IMAGE_TYPE_QCOW2"
VHD = "COMPUTE_IMAGE_TYPE_VHD"


@pytest.fixture
def images(stack: Stack) -> Iterator[Images]:
    made = Images(stack)
    yield made
    made.purge()


@pytest.fixture
def servers(stack: Stack) -> Iterator[Servers]:
    made = Servers(stack)
    yield made
    made.purge()


@pytest.fixture
def small(stack: Stack) -> Iterator[str]:
    with flavor(stack) as name:
        yield name


def _disk_format(path: str) -> str:
    info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", "-U", path],
                                     check=True, capture_output=True, text=True).stdout)
    return str(info["format"])


def _traits(stack: Stack, host: str) -> set[str]:
    found = placement_get(stack, f"/resource_providers/{provider_uuid(host)}/traits")
    return set(found["traits"])


def test_raw_server_goes_active_in_the_mapped_backend_and_delete_removes_it(
        stack: Stack, images: Images, servers: Servers, small: str) -> None:
    image = images("raw")
    host = "compute1"
    with stack.compute_options(host, "raw-flat", "[libvirt]\nimages_type_mapping = raw:flat\n"):
        server = servers.create(small, image, "--availability-zone", f":{host}", check=True)
        assert server["status"] == "ACTIVE" and host_of(server) == host
        assert server["OS-EXT-SRV-ATTR:hypervisor_hostname"] == host
        disk = servers.record(server["id"])["disk"]
        assert disk is not None and disk["backend"] == "flat"
        path = Path(disk["path"])
        assert path.is_file() and stack.computes[host] in path.parents
        assert _disk_format(str(path)) == "raw"
        assert list(allocations(stack, server["id"])) == [provider_uuid(host)]
        servers.delete(server["id"])
    assert not path.exists()
    assert allocations(stack, server["id"]) == {}
    assert servers.record(server["id"])["vm_state"] == "deleted"


def test_default_backend_builds_qcow2_over_the_cached_base(
        stack: Stack, images: Images, servers: Servers, small: str) -> None:
    server = servers.create(small, images("raw"), check=True)
    host = host_of(server)
    assert host in stack.computes
    disk = servers.record(server["id"])["disk"]
    assert disk is not None and disk["backend"] == "qcow2"
    assert _disk_format(disk["path"]) == "qcow2"


def test_vhd_image_no_host_supports_ends_error_with_no_valid_host(
        stack: Stack, images: Images, servers: Servers, small: str) -> None:
    # The stack's computes convert vhd with qemu-img (they claim COMPUTE_IMAGE_TYPE_VHD):
    # here none does.
    with contextlib.ExitStack() as restarts:
        for host in stack.computes:
            restarts.enter_context(stack.compute_options(
                host, "no-vhd", "[compute]\nimage_type_exclude_list = vhd\n"))
        for host in stack.computes:
            eventually(lambda h=host: VHD not in _traits(stack, h), 60, f"{host} without vhd")
        server = servers.create(small, images("vhd", data=converted("vhd")))
        assert server["status"] == "ERROR"
        fault = server["fault"]
        assert fault["message"].startswith("No valid host was found."), fault
    record = servers.record(server["id"])
    assert record["host"] is None and allocations(stack, server["id"]) == {}
    # An admin (the stack's .stack/env) sees which filter removed how many hosts.
    assert "->" in fault.get("details", ""), fault


def test_qcow2_server_never_lands_on_a_host_without_qcow2(
        stack: Stack, images: Images, servers: Servers, small: str) -> None:
    image = _qcow2_image(stack, images)
    with stack.compute_options("compute2", "no-qcow2",
                               "[compute]\nimage_type_exclude_list = qcow2\n"):
        eventually(lambda: QCOW2 not in _traits(stack, "compute2"), 60,
                   "compute2 to lose its qcow2 trait")
        hosts = [host_of(servers.create(small, image, check=True)) for _ in range(3)]
        assert "compute2" not in hosts and None not in hosts, hosts


def _qcow2_image(stack: Stack, images: Images) -> str:
    """A real qcow2 image (the stack's sample) under a new id."""
    sample = stack.dir / "samples" / "sample.qcow2"
    resp = stack.glance.post(f"{stack.glance_url}/v2/images", timeout=30, json={
        "name": "it-boot-qcow2", "disk_format": "qcow2", "container_format": "bare"})
    resp.raise_for_status()
    image_id: str = resp.json()["id"]
    images.created.append(image_id)
    stack.glance.put(f"{stack.glance_url}/v2/images/{image_id}/file", data=sample.read_bytes(),
                     timeout=120,
                     headers={"Content-Type": "application/octet-stream"}).raise_for_status()
    return image_id


def _downloads(stack: Stack, image_id: str) -> int:
    return sum(1 for r in stack.glance_requests()
               if r.method == "GET" and r.path == f"/v2/images/{image_id}/file")


def test_precached_image_boots_without_download_on_the_host_that_holds_it(
        stack: Stack, images: Images, servers: Servers, small: str,
        make_aggregate: Any) -> None:
    image = images("raw")
    aggregate = make_aggregate(hosts=("compute3",))
    resp = stack.api_request("POST", f"os-aggregates/{aggregate['id']}/images",
                             microversion="2.81", json={"cache": [{"id": image}]})
    assert resp.status_code == 202, resp.text
    eventually(lambda: host_images.hosts_with_image(stack.db, image) == {"compute3"},
               BUILD_TIMEOUT, "compute3's cache report naming the image")
    fetched = _downloads(stack, image)
    assert fetched == 1
    server = servers.create(small, image, check=True)
    assert host_of(server) == "compute3", server
    assert _downloads(stack, image) == fetched
    disk = servers.record(server["id"])["disk"]
    assert disk is not None and disk["image_fetched"] is False


def _memory_slot(stack: Stack, host: str) -> int:
    """The most ``MEMORY_MB`` one server may take on ``host``: all of it that Placement lets
    be allocated, capped by ``max_unit`` (VCPU would not do: its allocation ratio of 16
    makes a host's capacity far larger than the largest single allocation)."""
    inventory = placement_get(stack, f"/resource_providers/{provider_uuid(host)}/inventories")
    ram = inventory["inventories"]["MEMORY_MB"]
    capacity = int((ram["total"] - ram["reserved"]) * ram["allocation_ratio"])
    assert capacity < 2 * ram["max_unit"], ram  # one server of this size fills the host
    return min(capacity, ram["max_unit"])


def _usage(stack: Stack, host: str) -> int:
    used = placement_get(stack, f"/resource_providers/{provider_uuid(host)}/usages")
    return int(used["usages"].get("MEMORY_MB", 0))


def test_parallel_boots_for_the_last_slots(stack: Stack, images: Images,
                                           servers: Servers) -> None:
    slot = min(_memory_slot(stack, host) for host in stack.computes)
    usage = {host: _usage(stack, host) for host in stack.computes}
    assert set(usage.values()) == {0}, f"servers left by another test: {usage}"
    # One server fills a host: three slots for five parallel boots.
    image = images("raw")
    with flavor(stack, ram=slot) as whole_host:
        with concurrent.futures.ThreadPoolExecutor(5) as pool:
            booted = list(pool.map(lambda _: servers.create(whole_host, image), range(5)))
        states = sorted(s["status"] for s in booted)
        assert states == ["ACTIVE"] * 3 + ["ERROR"] * 2, booted
        active_hosts = sorted(host_of(s) or "" for s in booted if s["status"] == "ACTIVE")
        assert active_hosts == sorted(stack.computes)
        for server in booted:
            if server["status"] == "ERROR":
                assert server["fault"]["message"].startswith("No valid host was found.")
                assert allocations(stack, server["id"]) == {}
        for host in stack.computes:
            assert _usage(stack, host) == slot, host
        for server in booted:
            servers.delete(server["id"])
    for host in stack.computes:
        assert _usage(stack, host) == 0, host


def test_rebuild_to_an_image_the_host_cannot_use_is_error(
        stack: Stack, images: Images, servers: Servers, small: str) -> None:
    server = servers.create(small, images("raw"), check=True)
    # No compute of the stack claims ploop (COMPUTE_IMAGE_TYPE_PLOOP).
    stack.run_openstack("--os-compute-api-version", "2.81", "server", "rebuild", "--image",
                        images("ploop"), server["id"], check=False)
    shown = eventually(lambda: (s := servers.show(server["id"]))["status"] != "REBUILD" and s,
                       BUILD_TIMEOUT, "the rebuild to end")
    assert shown["status"] == "ERROR"
    assert shown["fault"]["message"].startswith("No valid host was found.")
    rebuilt = servers.create(small, images("raw"), check=True)
    stack.run_openstack("--os-compute-api-version", "2.81", "server", "rebuild", "--image",
                        images("raw"), "--wait", rebuilt["id"])
    assert servers.show(rebuilt["id"])["status"] == "ACTIVE"
