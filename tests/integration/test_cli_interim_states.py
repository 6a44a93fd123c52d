"""The ``fleetcache`` CLI on the real stack shows what a job waits for (issue 10, "See it"):
hosts waiting for a download slot of the image service, and hosts pending catch-up.

The conductor runs with one download of an image at a time and a catch-up window. The test
holds that image's only slot itself, with a real lease row in the stack's database (as another
conductor's download would), and stops compute3. A job on compute1 and compute3 then has
compute1 ``waiting`` and compute3 ``pending``: ``fleetcache cache-images --wait`` draws both in
its progress bar, ``fleetcache jobs show`` names them, and ``fleetcache cache list compute3``
lists the pending catch-up. Once the slot is given back, compute1 caches the image and
``--wait`` ends at ``catching_up``; once compute3 is back it is caught up, and its pending
catch-up is gone from ``cache list``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fleetcache.common.db import download_leases
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

MV = "2.81"
OPTIONS = ("[image_cache]\nmax_concurrent_downloads_per_image = 1\n"
           "download_lease_seconds = 60\ncatch_up_window = 600\ncatch_up_interval = 2\n")
HOLDER = "it-cli-interim:slot"
CLI = Path(os.environ.get("FLEETCACHE_VENV", Path(__file__).parents[2] / ".venv")) / "bin"


def _cli(stack: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI / "fleetcache"), *args], env=stack.process_env(),
                          capture_output=True, text=True, timeout=120, check=False)


def _job(stack: Any, agg_id: int) -> dict[str, Any] | None:
    listed = stack.api_request("GET", f"os-aggregates/{agg_id}/images/jobs",
                               microversion=MV).json()["jobs"]
    if not listed:
        return None
    return dict(stack.api_request("GET", f"os-aggregates/{agg_id}/images/jobs/"
                                  f"{listed[0]['id']}", microversion=MV).json()["job"])


def _states(job: dict[str, Any]) -> dict[str, str]:
    return {h["host"]: h["images"][0]["state"] for h in job.get("hosts") or []}


def test_cli_shows_hosts_waiting_for_a_slot_and_pending_catch_up(stack: Any,
                                                                make_aggregate: Any) -> None:
    image = stack.sample_images[1]  # raw: every compute takes it
    with stack.conductor_options("cli-interim", OPTIONS):
        agg = make_aggregate(hosts=("compute1", "compute3"))
        slot = download_leases.lease_acquire(
            stack.db, HOLDER, "elsewhere", image, download_leases.Limits(per_image=1), 120)
        assert slot.lease_id is not None, slot
        released, waiter = False, None
        stack.stop_service("compute3", kill=True)
        try:
            stack.wait_service_state("compute3", up=False)
            waiter = subprocess.Popen(
                [str(CLI / "fleetcache"), "cache-images", agg["name"], image, "--wait",
                 "--poll-interval", "0.2", "--timeout", "120"],
                env=stack.process_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            job = wait_for(lambda: (
                (j := _job(stack, agg["id"])) is not None
                and _states(j) == {"compute1": "waiting", "compute3": "pending"} and j),
                "compute1 waiting and compute3 pending", 60)

            shown = _cli(stack, "jobs", "show", job["id"], "--aggregate", str(agg["id"]))
            first = shown.stdout.splitlines()[0]
            assert first.startswith(f"Job {job['id']} is running: 1/2 hosts reported, "
                                    "1 waiting for a download slot, 1 pending catch-up until "
                                    f"{job['catch_up_until']}"), shown.stdout + shown.stderr
            assert "| compute1 | waiting (1 hosts downloading this image" in shown.stdout
            assert "| compute3 | pending (down)" in shown.stdout
            listing = _cli(stack, "cache", "list", "compute3")
            assert listing.returncode == 0, listing.stderr
            assert "Pending catch-up: job" in listing.stdout, listing.stdout
            assert job["id"] in listing.stdout and image in listing.stdout, listing.stdout

            download_leases.lease_release(stack.db, slot.lease_id)
            released = True
            out, err = waiter.communicate(timeout=120)
            assert waiter.returncode == 0, out + err
            bar = err.splitlines()
            assert any("running" in line and "1 waiting for a download slot, 1 pending "
                       "catch-up until" in line for line in bar), err
            # A pending host counts as reported (its result is stored): the bar is full,
            # and names the host still to come.
            assert bar[-1].startswith("[##############################] 2/2 hosts  "
                                      "catching_up  (1 "), err
            assert bar[-1].endswith(f"  1 pending catch-up until {job['catch_up_until']}"), err
            assert "1 host(s) pending (1 image(s))" in out, out
        finally:
            if waiter is not None and waiter.poll() is None:
                waiter.kill()
                waiter.communicate()
            if not released:
                download_leases.lease_release(stack.db, slot.lease_id)
            stack.start_service("compute3")
        stack.wait_service_state("compute3", up=True)
        wait_for(lambda: (j := _job(stack, agg["id"])) is not None
              and j["state"] == "done", "compute3 caught up", 90)
        listing = _cli(stack, "cache", "list", "compute3")
        assert listing.returncode == 0 and "Pending catch-up" not in listing.stdout, listing
