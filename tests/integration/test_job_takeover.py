"""No job lost, no host forgotten (issue 10), with real processes on the real stack.

* Two conductors (the stack's and a second ``fleetcache-conductor`` process the test starts
  on the same database and brokers as host ``it-conductor2``): the job's owner is killed with
  SIGKILL while hosts still download; the other takes the job over within ``job_lease_time +
  job_takeover_interval`` (plus a margin for a loaded machine), asks only the hosts without a
  stored result, and the job ends ``done``.
* A lone conductor killed mid-job and started again takes its own job over at start.
* Catch-up: a compute stopped during a job is ``pending``; a host added to the aggregate
  while the window is open becomes ``pending`` too; both are asked when up, and the job ends
  ``done`` with their final states.

What happened is checked against three independent records: the job resource, the computes'
``_base`` directories (the cached file, its size and hash) and Glance's access log (one ``GET
.../file`` per host and image: nobody downloaded twice).

Downloads are slowed by size and by ``precache_concurrency = 1``: fresh random images of
``IMAGE_MIB`` MiB, one host at a time, so the job is still running when its owner dies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetcache.common import servicegroup
from fleetcache.common.db import job_leases, jobs
from fleetcache.common.db import services as db_services
from tests.integration.conftest import VENV_BIN
from tests.integration.daemons import second_conductor_conf
from tests.integration.stackops import MV, cached_file, file_sha512, forget, get_job
from tests.waiting import seconds_until, wait_for

pytestmark = pytest.mark.integration

HOSTS = ("compute1", "compute2", "compute3")
IMAGE_MIB = 192
LEASE = 6
TAKEOVER_INTERVAL = 2
#: Seconds beyond the stated bound a takeover may take on this shared 2-core machine (a
#: claim runs in a periodic thread; re-planning asks Glance for each image).
MARGIN = 8
OPTIONS = (f"[conductor]\njob_lease_time = {LEASE}\n"
           f"job_takeover_interval = {TAKEOVER_INTERVAL}\n"
           "[image_cache]\nprecache_concurrency = 1\ncatch_up_window = 600\n"
           "catch_up_interval = 2\n")
SECOND = "it-conductor2"
FINAL = ("cached", "existing")


@pytest.fixture
def make_image(stack: Any) -> Iterator[Callable[[int], dict[str, Any]]]:
    """``make_image(mib)``: a new raw image of random bytes in Glance (no compute has it);
    deleted with its cached copies after the test."""
    made: list[str] = []

    def make(mib: int) -> dict[str, Any]:
        resp = stack.glance.post(f"{stack.glance_url}/v2/images", timeout=30, json={
            "name": f"it-takeover-{uuid.uuid4().hex[:8]}", "disk_format": "raw",
            "container_format": "bare"})
        resp.raise_for_status()
        image_id = resp.json()["id"]
        made.append(image_id)
        stack.glance.put(f"{stack.glance_url}/v2/images/{image_id}/file",
                         data=(os.urandom(1 << 20) for _ in range(mib)), timeout=600,
                         headers={"Content-Type": "application/octet-stream"}).raise_for_status()
        body: dict[str, Any] = stack.glance.get(f"{stack.glance_url}/v2/images/{image_id}",
                                                timeout=30).json()
        assert body["status"] == "active" and body["size"] == mib << 20, body
        return body

    yield make
    for image_id in made:
        stack.glance.delete(f"{stack.glance_url}/v2/images/{image_id}", timeout=30)
        forget(stack, image_id)


@pytest.fixture
def lease_conductor(stack: Any) -> Iterator[None]:
    """The stack's conductor restarted with short leases, one host call at a time and
    catch-up on."""
    for host in HOSTS:
        stack.wait_service_state(host, up=True)
    with stack.conductor_options("takeover", OPTIONS):
        yield
        if not (stack.dir / "run" / "conductor.pid").exists():  # the test killed it
            stack.start_service("conductor")


class SecondConductor:
    """A second ``fleetcache-conductor`` process on the stack's database and brokers."""

    def __init__(self, stack: Any, workdir: Path) -> None:
        confdir = workdir / "conductor2.d"
        confdir.mkdir()
        (confdir / "host.conf").write_text(second_conductor_conf(SECOND) + OPTIONS)
        self.log_file = workdir / "conductor2.log"
        self._log = self.log_file.open("ab")
        self.proc = subprocess.Popen(
            [str(VENV_BIN / "fleetcache-conductor"), *stack.conductor_args(),
             "--config-dir", str(confdir)],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._log.close()

    def log(self) -> str:
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-40:])


@pytest.fixture
def second_conductor(stack: Any, lease_conductor: None,
                     tmp_path: Path) -> Iterator[SecondConductor]:
    second = SecondConductor(stack, tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not _conductor_up(stack, SECOND):
            assert second.proc.poll() is None, f"conductor 2 exited:\n{second.log()}"
            assert time.monotonic() < deadline, f"conductor 2 not up:\n{second.log()}"
            time.sleep(0.5)
        yield second
    finally:
        second.kill()


def _conductor_up(stack: Any, host: str) -> bool:
    found = db_services.service_list(stack.db, binary="fleetcache-conductor", hosts=[host])
    return bool(found) and servicegroup.service_is_up(found[0], stack.service_down_time)


def _post(stack: Any, agg_id: int, image_ids: list[str]) -> str:
    resp = stack.api_request("POST", f"os-aggregates/{agg_id}/images", microversion=MV,
                             json={"cache": [{"id": i} for i in image_ids]})
    assert resp.status_code == 202, resp.text
    return str(resp.headers["Location"].rsplit("/", 1)[-1])


def _mid_job(stack: Any, job_id: str) -> bool:
    """Some hosts have stored results, some not yet: the moment to kill the owner."""
    job = jobs.job_get(stack.db, job_id)
    reported = {r["host"] for r in job["results"]}
    return job["state"] == jobs.RUNNING and 0 < len(reported) < len(HOSTS)


def _assert_agree(stack: Any, job: dict[str, Any], images: list[dict[str, Any]],
                  hosts: tuple[str, ...] = HOSTS) -> None:
    """Job, disks and Glance agree: every host has every image in a final cached state, the
    file is there with the right bytes, and Glance served each image once per host."""
    assert job["state"] == "done", job
    states = {h["host"]: {i["image_id"]: i["state"] for i in h["images"]} for h in job["hosts"]}
    assert states == {h: {img["id"]: states[h][img["id"]] for img in images} for h in hosts}, job
    for host in hosts:
        for image in images:
            assert states[host][image["id"]] in FINAL, (host, job)
            path = cached_file(stack, host, image["id"])
            assert path.stat().st_size == image["size"], path
            assert file_sha512(path) == image["os_hash_value"], path
    assert job_leases.count_results(stack.db, job["id"]) == len(hosts) * len(images)
    assert sum(job["counts"].values()) == len(hosts) * len(images), job["counts"]
    for image in images:
        path = f"/v2/images/{image['id']}/file"
        deadline = time.monotonic() + 10
        while True:
            gets = [r for r in stack.glance_requests() if r.method == "GET" and r.path == path]
            if len(gets) >= len(hosts) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        time.sleep(1)  # a second GET would show up now
        gets = [r for r in stack.glance_requests() if r.method == "GET" and r.path == path]
        assert len(gets) == len(hosts), (image["id"], gets)
        assert {g.status for g in gets} == {200}, gets


def _owner_host(stack: Any, job_id: str) -> str:
    owner = jobs.job_get(stack.db, job_id)["owner"]
    assert owner, "the job has no owner"
    return str(owner).rsplit(":", 1)[0]


def test_killed_owner_job_is_taken_over_by_the_other_conductor(
        stack, second_conductor, make_aggregate, make_image):
    images = [make_image(IMAGE_MIB), make_image(IMAGE_MIB)]
    agg = make_aggregate(hosts=HOSTS)
    job_id = _post(stack, agg["id"], [i["id"] for i in images])
    first_owner = jobs.job_get(stack.db, job_id)["owner"]
    wait_for(lambda: _mid_job(stack, job_id), "a job with some hosts done and some not", 300)

    if _owner_host(stack, job_id) == SECOND:
        second_conductor.kill()
    else:
        stack.stop_service("conductor", kill=True)
    killed = time.monotonic()
    reported = {r["host"] for r in jobs.job_get(stack.db, job_id)["results"]}

    took = seconds_until(lambda: jobs.job_get(stack.db, job_id)["owner"] != first_owner,
                         "the other conductor to take the job over",
                         LEASE + TAKEOVER_INTERVAL + MARGIN)
    assert took >= LEASE - 2, f"taken over after {took:.1f} s, before the lease expired"
    wait_for(lambda: get_job(stack, agg["id"], job_id)["state"] in ("done", "failed"),
             "the job to end", 300)
    job = get_job(stack, agg["id"], job_id)
    _assert_agree(stack, job, images)
    # Hosts with a stored result before the kill were not asked again: their results are
    # from before the kill.
    stored = jobs.job_get(stack.db, job_id)
    for result in stored["results"]:
        if result["host"] in reported:
            assert result["state"] == "cached", result
    print(f"takeover after {took:.1f} s (bound {LEASE + TAKEOVER_INTERVAL} s), "
          f"job ended {time.monotonic() - killed:.1f} s after the kill")


def test_lone_conductor_killed_and_restarted_takes_its_job_over(
        stack, lease_conductor, make_aggregate, make_image):
    images = [make_image(IMAGE_MIB), make_image(IMAGE_MIB)]
    agg = make_aggregate(hosts=HOSTS)
    job_id = _post(stack, agg["id"], [i["id"] for i in images])
    first_owner = jobs.job_get(stack.db, job_id)["owner"]
    wait_for(lambda: _mid_job(stack, job_id), "a job with some hosts done and some not", 300)
    stack.stop_service("conductor", kill=True)
    reported = {r["host"] for r in jobs.job_get(stack.db, job_id)["results"]}
    time.sleep(1)
    assert jobs.job_get(stack.db, job_id)["state"] == jobs.RUNNING  # nobody else runs it

    stack.start_service("conductor")
    took = seconds_until(lambda: jobs.job_get(stack.db, job_id)["owner"] != first_owner,
                         "the restarted conductor to take its job over", 60)
    wait_for(lambda: get_job(stack, agg["id"], job_id)["state"] in ("done", "failed"),
             "the job to end", 300)
    job = get_job(stack, agg["id"], job_id)
    assert job["error"] is None, job
    _assert_agree(stack, job, images)
    for result in jobs.job_get(stack.db, job_id)["results"]:
        if result["host"] in reported:
            assert result["state"] == "cached", result
    print(f"restarted conductor took its job over {took:.1f} s after its start")


def test_stopped_compute_is_pending_then_caught_up_and_added_host_too(
        stack, lease_conductor, make_aggregate, make_image):
    image = make_image(16)
    agg = make_aggregate(hosts=("compute1", "compute2"))
    stack.stop_service("compute2", kill=True)
    try:
        stack.wait_service_state("compute2", up=False)
        job_id = _post(stack, agg["id"], [image["id"]])
        wait_for(lambda: get_job(stack, agg["id"], job_id)["state"] == "catching_up",
                 "the first pass to end", 120)
        job = get_job(stack, agg["id"], job_id)
        by_host = {h["host"]: h["images"][0] for h in job["hosts"]}
        assert by_host["compute2"]["state"] == "pending", job
        assert by_host["compute2"]["reason"] == "down", job
        assert by_host["compute1"]["state"] == "cached", job
        assert job["catch_up_until"] is not None and job["finished_at"] is None, job
        assert not cached_file(stack, "compute2", image["id"]).exists()

        # A host added to the aggregate now is pending too, and caught up at once (it is up).
        resp = stack.api_request("POST", f"os-aggregates/{agg['id']}/action",
                                 json={"add_host": {"host": "compute3"}})
        resp.raise_for_status()
        wait_for(lambda: any(
            h["host"] == "compute3" and h["images"][0]["state"] in FINAL
            for h in get_job(stack, agg["id"], job_id)["hosts"]), "compute3 caught up", 60)
        job = get_job(stack, agg["id"], job_id)
        assert job["state"] == "catching_up" and job["total_hosts"] == 3, job
    finally:
        stack.start_service("compute2")
    stack.wait_service_state("compute2", up=True)
    took = seconds_until(lambda: get_job(stack, agg["id"], job_id)["state"] == "done",
                         "the job to end", 60)
    job = get_job(stack, agg["id"], job_id)
    _assert_agree(stack, job, [image], hosts=HOSTS)
    print(f"compute2 caught up {took:.1f} s after it was up again")
