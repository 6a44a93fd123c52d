"""Helpers of the boot-path integration tests: Glance images with properties, flavors, and
servers driven by the unmodified ``openstack`` client (``--os-compute-api-version 2.81``),
plus what Placement holds for them."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fleetcache.common.db import instances as db_instances
from fleetcache.common.db.instances import InstanceDict
from tests.integration.conftest import Stack

MICROVERSION = ("--os-compute-api-version", "2.81")
PLACEMENT_HEADERS = {"OpenStack-API-Version": "placement 1.28"}
#: Seconds a build may take here (a download, a disk, the scheduler on 2 shared cores).
BUILD_TIMEOUT = 120


def converted(disk_format: str, size: int = 1 << 20) -> bytes:
    """A real image of ``disk_format`` (qemu-img's name: ``vpc`` for vhd), ``size`` bytes of
    virtual disk."""
    qemu_format = {"vhd": "vpc"}.get(disk_format, disk_format)
    with tempfile.TemporaryDirectory() as tmp:
        raw, out = Path(tmp) / "src.raw", Path(tmp) / "out"
        raw.write_bytes(os.urandom(size))
        subprocess.run(["qemu-img", "convert", "-q", "-f", "raw", "-O", qemu_format, str(raw),
                        str(out)], check=True, timeout=60)
        return out.read_bytes()


class Images:
    """Creates Glance images (deleted at the end) with any disk format and properties."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.created: list[str] = []

    def __call__(self, disk_format: str = "raw", size: int = 1 << 20,
                 data: bytes | None = None, **properties: str) -> str:
        """A new active image; ``data`` defaults to ``size`` random bytes (Glance checks the
        bytes against ``disk_format``: other formats need real ``data``)."""
        body = {"name": f"it-boot-{uuid.uuid4().hex[:8]}", "disk_format": disk_format,
                "container_format": "bare", "visibility": "public", **properties}
        resp = self.stack.glance.post(f"{self.stack.glance_url}/v2/images", json=body,
                                      timeout=30)
        resp.raise_for_status()
        image_id: str = resp.json()["id"]
        self.created.append(image_id)
        self.stack.glance.put(
            f"{self.stack.glance_url}/v2/images/{image_id}/file",
            data=os.urandom(size) if data is None else data, timeout=120,
            headers={"Content-Type": "application/octet-stream"}).raise_for_status()
        return image_id

    def purge(self) -> None:
        for image_id in self.created:
            self.stack.glance.delete(f"{self.stack.glance_url}/v2/images/{image_id}", timeout=30)


@contextlib.contextmanager
def flavor(stack: Stack, vcpus: int = 1, ram: int = 64, disk: int = 1,
           extra_specs: dict[str, str] | None = None) -> Iterator[str]:
    """A flavor created with ``openstack flavor create``; yields its name."""
    name = f"it-f-{uuid.uuid4().hex[:8]}"
    args = ["flavor", "create", "--vcpus", str(vcpus),
            "--ram", str(ram), "--disk", str(disk)]
    for key, value in (extra_specs or {}).items():
        args += ["--property", f"{key}={value}"]
    stack.openstack_json(*MICROVERSION, *args, name)
    try:
        yield name
    finally:
        stack.run_openstack(*MICROVERSION, "flavor", "delete", name, check=False)


class Servers:
    """Boots servers with ``openstack server create ... --wait`` and deletes them at the
    end (through the API, waiting until they are gone)."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.created: list[str] = []

    def create(self, flavor_name: str, image_id: str, *extra: str,
               check: bool = False) -> dict[str, Any]:
        """:returns: the server as ``openstack server show -f json`` prints it after the
        create returned (ACTIVE, or ERROR when the build failed: ``--wait`` exits 1 then)."""
        name = f"it-s-{uuid.uuid4().hex[:8]}"
        proc = self.stack.run_openstack(
            *MICROVERSION, "server", "create", "--flavor", flavor_name, "--image", image_id,
            "--nic", "none", "--wait", *extra, "-f", "json", name, check=check)
        server = self.show(name)
        self.created.append(server["id"])
        if proc.returncode != 0:
            assert server["status"] == "ERROR", (proc.stdout, proc.stderr, server)
        return server

    def show(self, name_or_id: str) -> dict[str, Any]:
        shown: dict[str, Any] = self.stack.openstack_json(*MICROVERSION, "server", "show",
                                                         name_or_id)
        return shown

    def record(self, server_id: str) -> InstanceDict:
        return db_instances.instance_get(self.stack.db, server_id, read_deleted=True)

    def delete(self, server_id: str) -> None:
        self.stack.run_openstack(*MICROVERSION, "server", "delete", "--wait", server_id)

    def purge(self) -> None:
        for server_id in self.created:
            if self.record(server_id)["vm_state"] != "deleted":
                self.stack.run_openstack(*MICROVERSION, "server", "delete", "--wait",
                                         server_id, check=False)


def host_of(server: dict[str, Any]) -> str | None:
    """The host ``openstack server show`` prints to an admin."""
    host: str | None = server.get("OS-EXT-SRV-ATTR:host")
    return host


def placement_get(stack: Stack, path: str) -> Any:
    resp = stack.admin_http.get(stack.env["FLEETCACHE_PLACEMENT_URL"].rstrip("/") + path,
                                headers=PLACEMENT_HEADERS, timeout=30)
    resp.raise_for_status()
    return resp.json()


def allocations(stack: Stack, server_id: str) -> dict[str, Any]:
    """``{provider uuid: {"resources": {...}}}`` Placement holds for the server."""
    found: dict[str, Any] = placement_get(stack, f"/allocations/{server_id}")["allocations"]
    return found


def eventually(check: Any, timeout: float = 30, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.5)
