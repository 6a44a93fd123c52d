"""The unmodified ``nova`` CLI (python-novaclient) against the real stack, with Keystone
(issue 3: "``nova aggregate-cache-images`` works against it").

The environment is the admin's ``.stack/env`` (password auth): novaclient finds the compute API
in the catalog, and resolves image ids on the catalog's image service, the stack's Glance.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.stackops import MV, cached_file, file_sha512, glance_image

pytestmark = pytest.mark.integration

HOSTS = ("compute1", "compute3")  # one in each cell
NOVA = Path(os.environ.get("FLEETCACHE_VENV", Path(__file__).parents[2] / ".venv")) / "bin" / "nova"


def nova_env(stack: Any) -> dict[str, str]:
    """The process environment without any ``OS_*`` of ours, plus the admin's ``OS_*``."""
    return stack.process_env("admin")


def nova(stack: Any, *args: str) -> str:
    """Run ``nova ARGS``; :returns: its stdout. :raises AssertionError: when it exits non-0."""
    proc = subprocess.run([str(NOVA), *args], env=nova_env(stack), capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, (
        f"nova {' '.join(args)} exited {proc.returncode}\nstdout: {proc.stdout}\n"
        f"stderr: {proc.stderr}")
    return proc.stdout


def _aggregate_by_name(stack: Any, name: str) -> dict[str, Any] | None:
    resp = stack.api_request("GET", "os-aggregates")
    resp.raise_for_status()
    found = [a for a in resp.json()["aggregates"] if a["name"] == name]
    assert len(found) <= 1, found
    return found[0] if found else None


@pytest.fixture
def nova_aggregate(stack: Any, aggregate_name: str) -> Iterator[str]:
    """A name for the aggregate ``nova`` creates; whatever is left of it is purged after."""
    yield aggregate_name
    agg = _aggregate_by_name(stack, aggregate_name)
    if agg is not None:
        stack.purge_aggregate(agg["id"])


def _wait_only_job(stack: Any, agg_id: int, timeout: float = 120) -> dict[str, Any]:
    """The aggregate's one job, once it is done or failed."""
    deadline = time.monotonic() + timeout
    while True:
        resp = stack.api_request("GET", f"os-aggregates/{agg_id}/images/jobs", microversion=MV)
        resp.raise_for_status()
        found = resp.json()["jobs"]
        assert len(found) <= 1, found
        if found and found[0]["state"] in ("done", "failed"):
            resp = stack.api_request(
                "GET", f"os-aggregates/{agg_id}/images/jobs/{found[0]['id']}", microversion=MV)
            resp.raise_for_status()
            job: dict[str, Any] = resp.json()["job"]
            return job
        assert time.monotonic() < deadline, f"no finished job on aggregate {agg_id}: {found}"
        time.sleep(0.5)


def test_nova_aggregate_cache_images_fills_the_hosts(stack, nova_aggregate):
    images = list(stack.sample_images)  # a qcow2 and a raw
    for host in HOSTS:
        stack.wait_service_state(host, up=True)
    for host in stack.computes:  # start from empty caches so the request must download
        for image_id in images:
            cached_file(stack, host, image_id).unlink(missing_ok=True)
    api_log = stack.log_file("api")
    api_log_start = api_log.stat().st_size
    glance_start = len(stack.glance_requests())

    nova(stack, "aggregate-create", nova_aggregate)
    agg = _aggregate_by_name(stack, nova_aggregate)
    assert agg is not None and agg["hosts"] == []
    for host in HOSTS:
        out = nova(stack, "aggregate-add-host", nova_aggregate, host)
        assert f"Host {host} has been successfully added" in out
    assert sorted(_aggregate_by_name(stack, nova_aggregate)["hosts"]) == sorted(HOSTS)

    nova(stack, "aggregate-cache-images", nova_aggregate, *images)
    with api_log.open() as f:  # novaclient found the images in Glance, not on the compute API
        f.seek(api_log_start)
        assert not [line for line in f if '"GET /v2.1/v2/images' in line]
    lookups = [r for r in stack.glance_requests()[glance_start:]
               if r.method == "GET" and r.path.startswith("/v2/images")
               and any(i in r.path for i in images)]
    assert lookups and all(r.status == 200 for r in lookups), lookups

    job = _wait_only_job(stack, agg["id"])
    assert job["state"] == "done", job
    states = {h["host"]: {i["image_id"]: i["state"] for i in h["images"]} for h in job["hosts"]}
    assert states == {host: {i: "cached" for i in images} for host in HOSTS}
    glance = {i: glance_image(stack, i) for i in images}
    for entry in job["hosts"]:
        assert entry["bytes_downloaded"] == sum(g["size"] for g in glance.values()), entry
    for image_id in images:
        copies = {file_sha512(cached_file(stack, host, image_id)) for host in HOSTS}
        assert len(copies) == 1, f"the hosts hold different copies of {image_id}"
        if glance[image_id]["disk_format"] == "raw":
            assert copies == {glance[image_id]["os_hash_value"]}
    assert not any(cached_file(stack, "compute2", i).exists() for i in images)  # not a member

    for host in HOSTS:
        out = nova(stack, "aggregate-remove-host", nova_aggregate, host)
        assert f"Host {host} has been successfully removed" in out
    out = nova(stack, "aggregate-delete", nova_aggregate)
    assert "has been successfully deleted" in out
    assert _aggregate_by_name(stack, nova_aggregate) is None
