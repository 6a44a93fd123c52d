"""``fleetcache ... -f json`` and ``cache-images --pin-seconds`` on the real stack (issue 23,
"clients that script"): a script pins a pre-cache, follows it and reads the job, the job list
and a host's cache as the API's objects, parsed with ``json.loads``; a malformed pin is a
usage error before any request, and one the API refuses comes back with the API's reason.
A job's terms (fleetcache 1.1) go the same way: sent by the options, read back as JSON."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import hostile_images
from tests.integration.stackops import (
    fleetcache_cli,
    get_job,
    pin_length,
    short_wait_terms,
    terms_options,
    wait_job_done,
)
from tests.integration.test_status_page import upload_image

pytestmark = pytest.mark.integration

HOSTS = ("compute1", "compute3")
#: Long enough to outlast the CLI calls before the hosts' cache is read (each authenticates:
#: a 15 s pin had ended by then); the image is this test's own, so no other test's ageing
#: meets the pin.
PIN = 600


@pytest.fixture
def own_image(stack: Any, tmp_path: Path) -> Iterator[str]:
    """A small raw image of this test's own in the stack's Glance."""
    image_id = upload_image(stack, hostile_images.raw(tmp_path), "raw")
    yield image_id
    stack.glance.delete(f"{stack.glance_url}/v2/images/{image_id}", timeout=30)


def _json(stack: Any, *args: str) -> Any:
    proc = fleetcache_cli(stack, *args, "-f", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_a_pinned_job_followed_and_read_as_json(stack: Any, make_aggregate: Any,
                                               own_image: str) -> None:
    agg = make_aggregate(hosts=HOSTS)
    image = own_image
    proc = fleetcache_cli(stack, "cache-images", agg["name"], image, "--pin-seconds", str(PIN),
                          "--wait", "--timeout", "120", "-f", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2/2 hosts" in proc.stderr  # the progress bar, off stdout
    job = json.loads(proc.stdout)
    assert job["state"] == "done"
    assert abs(pin_length(job) - PIN) < 5, job  # from the job's creation, give or take
    states = {h["host"]: h["images"][0]["state"] for h in job["hosts"]}
    assert sorted(states) == list(HOSTS)
    assert set(states.values()) == {"cached"}, states

    shown = _json(stack, "jobs", "show", job["id"], "--aggregate", agg["name"])
    assert {k: v for k, v in shown.items() if k != "links"} == {
        k: v for k, v in get_job(stack, agg["id"], job["id"]).items() if k != "links"}
    assert shown["links"][0]["rel"] == "self"
    (listed,) = _json(stack, "jobs", "list", agg["name"])
    assert listed["id"] == job["id"] and "hosts" not in listed
    assert listed["pin_until"] == job["pin_until"]

    # the hosts' reports carry the pin: a host's cache, as JSON, names it
    deadline = time.monotonic() + 30
    while True:
        cache = _json(stack, "cache", "list", HOSTS[0])
        pins = {i["image_id"]: i["pinned_until"] for i in cache["images"]}
        if pins.get(image):
            break
        assert time.monotonic() < deadline, cache
        time.sleep(0.5)
    assert pins[image][:19] == job["pin_until"][:19], (pins, job)


def test_pins_the_cli_or_the_api_refuse(stack: Any, make_aggregate: Any) -> None:
    agg = make_aggregate(hosts=HOSTS[:1])
    image = stack.sample_images[0]
    malformed = fleetcache_cli(stack, "cache-images", agg["name"], image, "--pin-seconds", "0")
    assert malformed.returncode == 2
    assert "argument --pin-seconds: 0 is not a positive number of seconds" in malformed.stderr
    too_long = fleetcache_cli(stack, "cache-images", agg["name"], image,
                              "--pin-seconds", "99999999")
    assert too_long.returncode == 1
    assert too_long.stderr == (
        "fleetcache: HTTP 400: Invalid input for field/attribute fleetcache:pin_seconds. "
        "Value: 99999999. 99999999 is greater than the maximum of 31622400\n")
    assert _json(stack, "jobs", "list", agg["name"]) == []  # neither made a job


def test_terms_the_cli_or_the_api_refuse(stack: Any, make_aggregate: Any) -> None:
    agg = make_aggregate(hosts=HOSTS[:1])
    image = stack.sample_images[0]
    malformed = fleetcache_cli(stack, "cache-images", agg["name"], image,
                               "--window", "25:00-05:00")
    assert malformed.returncode == 2
    assert "argument --window: '25:00-05:00' is not a daily window" in malformed.stderr
    above_cap = fleetcache_cli(stack, "cache-images", agg["name"], image, "--parallelism", "2")
    assert above_cap.returncode == 1
    assert above_cap.stderr == (
        "fleetcache: HTTP 400: Invalid input: fleetcache:parallelism: 2 is above the "
        "operator's limit 1 ([image_cache] precache_concurrency)\n")
    slow = fleetcache_cli(stack, "cache-images", agg["name"], image, "--host-rate", "1K")
    assert slow.returncode == 1
    assert "fleetcache:host_bytes_per_second" in slow.stderr
    assert "less than the minimum of 16384" in slow.stderr
    unknown_zone = fleetcache_cli(stack, "cache-images", agg["name"], image,
                                  "--window", "01:00-05:00", "--timezone", "Europe")
    assert unknown_zone.returncode == 1
    assert "fleetcache:window: 'Europe' is not a known IANA time zone" in unknown_zone.stderr
    assert _json(stack, "jobs", "list", agg["name"]) == []  # no refusal made a job


def test_a_job_with_terms_waits_then_runs_and_shows_them_as_json(
        stack: Any, make_aggregate: Any, own_image: str) -> None:
    agg = make_aggregate(hosts=HOSTS)
    terms = short_wait_terms()
    created = _json(stack, "cache-images", agg["name"], own_image, *terms_options(terms))
    assert created["terms"] == terms
    assert created["state"] in ("queued", "scheduled"), created

    # jobs show exits 1 while the job is not over, whatever the format (docs/precache.md)
    proc = fleetcache_cli(stack, "jobs", "show", created["id"], "--aggregate", agg["name"],
                          "-f", "json")
    assert proc.returncode == 1, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["terms"] == terms == get_job(stack, agg["id"], created["id"])["terms"]
    (listed,) = _json(stack, "jobs", "list", agg["name"])
    assert listed["terms"] == terms
    table = fleetcache_cli(stack, "jobs", "show", created["id"])
    assert "Terms: not before " + terms["not_before"] in table.stdout, table.stdout
    if shown["state"] == "scheduled":
        assert shown["next_start_at"] is not None
        assert "waiting for its window until" in table.stdout

    job = wait_job_done(stack, agg["id"], created["id"], timeout=180)
    assert job["state"] == "done" and job["next_start_at"] is None, job
    # no host was asked before not_before
    assert min(h["images"][0]["updated_at"] for h in job["hosts"]) >= (
        terms["not_before"].rstrip("Z")), job
    assert {h["images"][0]["state"] for h in job["hosts"]} == {"cached"}, job

