"""The stack's real Placement, seen through the unmodified ``openstack`` client (osc-placement,
``.stack/placement-env``): the three computes are resource providers with their inventory and
image-type traits, a compute configured without qcow2 loses ``COMPUTE_IMAGE_TYPE_QCOW2``, and
aggregate membership changed through ``/os-aggregates`` shows in the provider's aggregates
(``fleetcache-manage placement sync-aggregates`` repairs what drifts)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from fleetcache.conductor.placement import provider_uuid
from tests.integration.conftest import VENV_BIN, Stack

pytestmark = pytest.mark.integration

QCOW2 = "COMPUTE_IMAGE_TYPE_QCOW2"


def _eventually(check: Callable[[], Any], timeout: float = 30, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.5)


def traits(stack: Stack, host: str) -> set[str]:
    rows = stack.openstack_json("resource", "provider", "trait", "list", provider_uuid(host),
                                placement=True)
    return {r["name"] for r in rows}


def aggregates(stack: Stack, host: str) -> set[str]:
    rows = stack.openstack_json("--os-placement-api-version", "1.19", "resource", "provider",
                                "aggregate", "list", provider_uuid(host), placement=True)
    return {r["uuid"] for r in rows}


def test_every_compute_is_a_resource_provider_with_inventory_and_traits(stack: Stack) -> None:
    providers = stack.openstack_json("resource", "provider", "list", placement=True)
    by_name = {p["name"]: p["uuid"] for p in providers}
    for host in stack.computes:
        assert by_name.get(host) == provider_uuid(host), providers
        inventory = stack.openstack_json("resource", "provider", "inventory", "list",
                                         provider_uuid(host), placement=True)
        classes = {row["resource_class"]: row for row in inventory}
        assert {"VCPU", "MEMORY_MB", "DISK_GB"} <= set(classes), inventory
        assert classes["MEMORY_MB"]["reserved"] == 512
        assert {"COMPUTE_IMAGE_TYPE_RAW", QCOW2} <= traits(stack, host)
    services = stack.openstack_json("compute", "service", "list", "--long",
                                    "--service", "fleetcache-compute")
    assert {s["Host"]: s["Disabled Reason"] for s in services} == {
        h: None for h in stack.computes}


def test_a_compute_configured_without_qcow2_lacks_the_trait(stack: Stack) -> None:
    host = "compute2"
    conf_file = stack.compute_conf_file(host)
    original = conf_file.read_text()
    assert "[compute]" not in original
    conf_file.write_text(original + "\n[compute]\nimage_type_exclude_list = qcow2\n")
    try:
        stack.stop_service(host)
        stack.start_service(host)
        _eventually(lambda: QCOW2 not in traits(stack, host), what=f"{host} losing {QCOW2}")
        assert "COMPUTE_IMAGE_TYPE_RAW" in traits(stack, host)
        assert QCOW2 in traits(stack, "compute1")
    finally:
        conf_file.write_text(original)
        stack.stop_service(host)
        stack.start_service(host)
        stack.wait_service_state(host, up=True)
    _eventually(lambda: QCOW2 in traits(stack, host), what=f"{host} getting {QCOW2} back")


def test_aggregate_membership_mirrors_into_placement(stack: Stack, aggregate_name: str) -> None:
    agg = stack.openstack_json("--os-compute-api-version", "2.41", "aggregate", "create",
                               aggregate_name)
    try:
        stack.run_openstack("aggregate", "add", "host", aggregate_name, "compute3")
        _eventually(lambda: agg["uuid"] in aggregates(stack, "compute3"),
                    what="compute3's provider in the aggregate")
        assert agg["uuid"] not in aggregates(stack, "compute1")

        stack.run_openstack("aggregate", "remove", "host", aggregate_name, "compute3")
        _eventually(lambda: agg["uuid"] not in aggregates(stack, "compute3"),
                    what="compute3's provider out of the aggregate")
    finally:
        stack.purge_aggregate(agg["id"])


def test_sync_aggregates_repairs_drift(stack: Stack, aggregate_name: str) -> None:
    stray = "0b6f3c1e-0000-4000-8000-0000000000aa"
    rp = provider_uuid("compute1")
    generation = stack.openstack_json("resource", "provider", "show", rp,
                                      placement=True)["generation"]
    stack.run_openstack("--os-placement-api-version", "1.19", "resource", "provider",
                        "aggregate", "set", "--aggregate", stray, "--generation",
                        str(generation), rp, placement=True)
    assert stray in aggregates(stack, "compute1")

    proc = subprocess.run(
        [str(VENV_BIN / "fleetcache-manage"), "--config-file", str(stack.conf_file),
         "placement", "sync-aggregates"],
        capture_output=True, text=True, timeout=60, check=False)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"compute1: -aggregates {stray}" in proc.stdout
    assert stray not in aggregates(stack, "compute1")
