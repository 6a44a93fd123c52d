"""``fleetcache cache list HOST`` on the real stack: what a compute reported after a pre-cache,
through ``GET /v2.1/os-hosts/{host}/image-cache``, against the compute's own ``_base``."""

from __future__ import annotations

import datetime
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from fleetcache.client.render import human_bytes
from fleetcache.compute.imagecache import cache_name
from tests.integration.stackops import precache_and_wait

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

    # the compute casts its report once the request is done: wait until a report made since
    # names the images (an earlier test may have left a report naming them already)
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(started - 1))
    deadline = time.monotonic() + 60
    while True:
        cache = stack.api_request("GET", f"os-hosts/{HOST}/image-cache").json()["image_cache"]
        listed = {i["image_id"]: i for i in cache["images"]}
        if set(image_ids) <= set(listed) and (cache["reported_at"] or "") >= since:
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
        assert last_used >= since

    missing = _cli(stack, "cache", "list", "no-such-host")
    assert missing.returncode == 1
    assert "HTTP 404" in missing.stderr


PIN = 15


def _row(output: str, image_id: str) -> list[str]:
    [line] = [line for line in output.splitlines() if f"| {image_id} " in line]
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_cache_list_shows_a_pin_while_it_lasts(stack: Any, make_aggregate: Any) -> None:
    """A pinned pre-cache shows its pin in ``fleetcache cache list``, an unpinned one a dash;
    once the pin ends the column goes (the compute's report carries the pin to the
    conductor, which stores it with the host's images)."""
    pinned, unpinned = stack.sample_images[:2]
    aggregate = make_aggregate(hosts=(HOST,))
    job = precache_and_wait(stack, aggregate["id"], pinned, PIN)
    assert job["pin_until"] and job["hosts"][0]["images"][0]["state"] in ("cached", "existing")
    assert precache_and_wait(stack, aggregate["id"], unpinned, None)["pin_until"] is None

    # The compute casts its report after each request: wait until it names both images.
    deadline = time.monotonic() + 30
    while True:
        cache = stack.api_request("GET", f"os-hosts/{HOST}/image-cache").json()["image_cache"]
        listed = {i["image_id"]: i for i in cache["images"]}
        if {pinned, unpinned} <= set(listed) and listed[pinned]["pinned_until"]:
            break
        assert time.monotonic() < deadline, cache
        time.sleep(0.3)
    # The compute's pin runs from the job's pin_until (what the conductor asked for).
    assert listed[pinned]["pinned_until"][:19] == job["pin_until"][:19], (listed, job)
    assert listed[unpinned]["pinned_until"] is None

    proc = _cli(stack, "cache", "list", HOST)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Pinned until" in proc.stdout, proc.stdout
    assert _row(proc.stdout, pinned)[-1] == listed[pinned]["pinned_until"], proc.stdout
    assert _row(proc.stdout, unpinned)[-1] == "-", proc.stdout

    # After the pin: no image is pinned any more, and the column goes (not before).
    pin_end = datetime.datetime.fromisoformat(job["pin_until"]).replace(
        tzinfo=datetime.UTC).timestamp()
    deadline = time.monotonic() + PIN + 30
    while "Pinned until" in (proc := _cli(stack, "cache", "list", HOST)).stdout:
        assert time.monotonic() < deadline, proc.stdout
        time.sleep(1)
    assert time.time() >= pin_end
    assert proc.returncode == 0 and f"| {pinned} " in proc.stdout, proc.stdout
