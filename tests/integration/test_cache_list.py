"""``fleetcache cache list HOST`` on the real stack: what a compute reported after a pre-cache,
through ``GET /v2.1/os-hosts/{host}/image-cache``, against the compute's own ``_base``."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from fleetcache.cmd._render import human_bytes
from fleetcache.compute.imagecache import cache_name

pytestmark = pytest.mark.integration

HOST = "compute1"
MV = "2.81"


def _cli(stack: Any, *args: str) -> subprocess.CompletedProcess[str]:
    venv = Path(os.environ.get("FLEETCACHE_VENV", Path(__file__).parents[2] / ".venv"))
    return subprocess.run([str(venv / "bin" / "fleetcache"), *args], env=stack.process_env(),
                          capture_output=True, text=True, timeout=120, check=False)


def test_cache_list_shows_what_the_compute_holds(stack: Any, make_aggregate: Any) -> None:
    aggregate = make_aggregate(hosts=(HOST,))
    image_ids = list(stack.sample_images)
    started = time.time()
    resp = stack.api_request("POST", f"os-aggregates/{aggregate['id']}/images", microversion=MV,
                             json={"cache": [{"id": i} for i in image_ids]})
    assert resp.status_code == 202, resp.text

    # the compute casts its report once the request is done: wait until it names the images
    deadline = time.monotonic() + 60
    while True:
        cache = stack.api_request("GET", f"os-hosts/{HOST}/image-cache").json()["image_cache"]
        listed = {i["image_id"]: i for i in cache["images"]}
        if set(image_ids) <= set(listed) and cache["reported_at"] is not None:
            break
        assert time.monotonic() < deadline, cache
        time.sleep(0.5)

    proc = _cli(stack, "cache", "list", HOST)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"Image cache of {HOST}: ")
    base = Path(stack.computes[HOST]) / "_base"
    for image_id in image_ids:
        size = (base / cache_name(image_id)).stat().st_size
        assert listed[image_id]["size"] == size
        row = [line for line in lines if f"| {image_id} " in line]
        assert len(row) == 1 and human_bytes(size) in row[0], proc.stdout
        last_used = listed[image_id]["last_used"]
        assert last_used >= time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(started - 1))

    missing = _cli(stack, "cache", "list", "no-such-host")
    assert missing.returncode == 1
    assert "HTTP 404" in missing.stderr
