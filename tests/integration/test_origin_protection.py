"""Origin protection on the real stack: two conductors, two jobs, and Glance's own record of
how many image downloads it served at once (issue 10, "Protect the image service").

A second ``fleetcache-conductor`` process (host ``it-conductor2``) joins the stack's
conductor, both restarted on the same ``[image_cache]`` options. Each conductor is handed one
job through its own RPC server (``cache_images`` prepared with ``server=<its host>``), so the
two jobs certainly run in two processes: job 1 caches image X, job 2 image Y, both on all
three computes, ``precache_concurrency`` wide enough to call every host at once. Without a
limit that is six downloads at once; with ``max_concurrent_downloads_per_image = 2`` and
``max_concurrent_downloads = 3``, Glance's access log (each line has its start, stamped by
``tools/glance/gunicorn_hooks.py``, and its duration) must never show more than three
``GET .../file`` in flight, nor more than two of one image; the jobs end ``done`` with every
host ``cached``, a host was seen ``waiting`` while they ran, and no lease is left.

The test prints the figures of both runs (peak concurrent GETs, job time) for
``docs/performance.md``, "Origin protection" (``pytest -s``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oslo_config import cfg
from sqlalchemy import delete

from fleetcache.common import config, rpc
from fleetcache.common.context import RequestContext
from fleetcache.common.db import download_leases, jobs, models
from tests.integration.daemons import VENV_BIN, second_conductor_conf
from tests.integration.stackops import MV, forget
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

HOSTS = ("compute1", "compute2", "compute3")
CONDUCTOR2 = "it-conductor2"
IMAGE_MIB = 96
PER_IMAGE, TOTAL = 2, 3
#: Both conductors call every host of both jobs at once: only the leases limit downloads.
WIDE = "[image_cache]\nprecache_concurrency = 6\n"
CAPPED = (WIDE + f"max_concurrent_downloads_per_image = {PER_IMAGE}\n"
          f"max_concurrent_downloads = {TOTAL}\ndownload_lease_seconds = 15\n")


@dataclasses.dataclass
class Run:
    """What one run of the two jobs showed."""

    jobs: list[dict[str, Any]]
    owners: list[str | None]
    peak: int
    peak_per_image: dict[str, int]
    seconds: float
    seen_waiting: bool


@pytest.fixture
def two_images(stack: Any) -> Iterator[list[str]]:
    """Two new raw images of IMAGE_MIB random MiB each, deleted (with their cached copies)
    after the test."""
    ids: list[str] = []
    try:
        for n in range(2):
            resp = stack.glance.post(f"{stack.glance_url}/v2/images", timeout=30, json={
                "name": f"it-origin-{n}-{uuid.uuid4().hex[:8]}", "disk_format": "raw",
                "container_format": "bare"})
            resp.raise_for_status()
            ids.append(resp.json()["id"])
            stack.glance.put(f"{stack.glance_url}/v2/images/{ids[-1]}/file",
                             data=(os.urandom(1 << 20) for _ in range(IMAGE_MIB)), timeout=600,
                             headers={"Content-Type": "application/octet-stream"}
                             ).raise_for_status()
        yield ids
    finally:
        for image_id in ids:
            stack.glance.delete(f"{stack.glance_url}/v2/images/{image_id}", timeout=30)
            forget(stack, image_id)


@contextlib.contextmanager
def _second_conductor(stack: Any, workdir: Path) -> Iterator[None]:
    """``fleetcache-conductor`` as ``it-conductor2``, on the stack's configuration and its
    ``conductor.d`` (so on the same options as the stack's conductor)."""
    override = workdir / "conductor2.conf"
    override.write_text(second_conductor_conf(CONDUCTOR2))
    log = (workdir / "conductor2.log").open("ab")
    proc = subprocess.Popen(
        [str(VENV_BIN / "fleetcache-conductor"), *stack.conductor_args(),
         "--config-dir", str(stack.dir / "etc" / "conductor.d"),
         "--config-file", str(override)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def running() -> None:
        if proc.poll() is not None:
            raise AssertionError(f"the second conductor exited ({proc.returncode}):\n"
                                 + (workdir / "conductor2.log").read_text()[-4000:])

    try:
        wait_for(lambda: _registered(stack), "the second conductor to register", 60, guard=running)
        yield
        running()
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
        with stack.db.transaction() as session:
            session.execute(delete(models.Service).where(models.Service.host == CONDUCTOR2))


def _registered(stack: Any) -> bool:
    try:
        return bool(stack.service_is_up(CONDUCTOR2, binary="fleetcache-conductor"))
    except Exception:
        return False


@pytest.fixture
def conductor_rpc(stack: Any) -> Iterator[Any]:
    """An RPC client of the ``conductor`` topic on the stack's broker."""
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([], project="fleetcache-it", default_config_files=[str(stack.conf_file)],
         default_config_dirs=[])
    transports = rpc.Transports(conf)
    try:
        yield rpc.get_client(transports.get(), "conductor")
    finally:
        transports.cleanup()


def _peaks(gets: list[Any]) -> int:
    """Most requests in flight at once (an end at the same instant as a start comes first)."""
    events = sorted([(g.started, 1) for g in gets] + [(g.ended, -1) for g in gets],
                    key=lambda e: (e[0], e[1]))
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def _image_gets(stack: Any, image_ids: list[str], since: float,
                want: int, timeout: float = 15) -> list[Any]:
    """Glance's ``GET .../file`` of the images started after ``since`` (a line is written
    when its response ends, so wait briefly for the last ones)."""
    paths = {f"/v2/images/{i}/file" for i in image_ids}
    deadline = time.monotonic() + timeout
    while True:
        gets = [r for r in stack.glance_requests()
                if r.method == "GET" and r.path in paths and r.started is not None
                and r.started >= since]
        if len(gets) >= want or time.monotonic() > deadline:
            return gets
        time.sleep(0.2)


def _run(stack: Any, client: Any, owners: list[str], aggregates: list[dict[str, Any]],
         images: list[str]) -> Run:
    """Both jobs, one per conductor, at once; poll them until done."""
    for image_id in images:
        forget(stack, image_id)
    since = time.time()
    ctxt = RequestContext(is_admin=True, roles=["admin"], overwrite=False,
                          global_request_id=f"req-{uuid.uuid4()}")
    job_ids = []
    for owner, aggregate, image_id in zip(owners, aggregates, images, strict=True):
        cctxt = rpc.prepare(client, "cache_images", "1.0", server=owner, timeout=60)
        job_ids.append(cctxt.call(ctxt, "cache_images", aggregate_id=aggregate["id"],
                                  image_ids=[image_id])["uuid"])
    seen_waiting, shown = False, []
    deadline = time.monotonic() + 300
    while True:
        shown = []
        for aggregate, job_id in zip(aggregates, job_ids, strict=True):
            resp = stack.api_request(
                "GET", f"os-aggregates/{aggregate['id']}/images/jobs/{job_id}", microversion=MV)
            resp.raise_for_status()
            shown.append(resp.json()["job"])
        seen_waiting = seen_waiting or any(
            i["state"] == jobs.WAITING for j in shown for h in j["hosts"] for i in h["images"])
        if all(j["state"] in (jobs.DONE, jobs.FAILED) for j in shown):
            break
        assert time.monotonic() < deadline, shown
        time.sleep(0.2)
    stored = [jobs.job_get(stack.db, job_id) for job_id in job_ids]
    seconds = (max(j["finished_at"] for j in stored if j["finished_at"])
               - min(j["created_at"] for j in stored)).total_seconds()
    gets = _image_gets(stack, images, since, want=len(HOSTS) * len(images))
    return Run(jobs=shown, owners=[j["conductor_host"] for j in stored], peak=_peaks(gets),
               peak_per_image={i: _peaks([g for g in gets if i in g.path]) for i in images},
               seconds=seconds, seen_waiting=seen_waiting)


def _check_done(run: Run, images: list[str]) -> None:
    for job, image_id in zip(run.jobs, images, strict=True):
        assert job["state"] == "done", job
        assert {h["host"]: [(i["image_id"], i["state"]) for i in h["images"]]
                for h in job["hosts"]} == {h: [(image_id, "cached")] for h in HOSTS}, job


def test_two_conductors_never_exceed_the_download_caps(
        stack, make_aggregate, two_images, conductor_rpc, tmp_path):
    for host in HOSTS:
        stack.wait_service_state(host, up=True)
    aggregates = [make_aggregate(hosts=HOSTS), make_aggregate(hosts=HOSTS)]
    first = str(stack.conf.host)
    owners = [first, CONDUCTOR2]
    assert first != CONDUCTOR2

    with stack.conductor_options("origin-wide", WIDE), _second_conductor(stack, tmp_path):
        free = _run(stack, conductor_rpc, owners, aggregates, two_images)
    _check_done(free, two_images)

    with stack.conductor_options("origin-capped", CAPPED), _second_conductor(stack, tmp_path):
        capped = _run(stack, conductor_rpc, owners, aggregates, two_images)
    _check_done(capped, two_images)

    print(f"\norigin protection, {len(HOSTS)} hosts x 2 images of {IMAGE_MIB} MiB, 2 "
          f"conductors: no cap: peak {free.peak} concurrent GETs (per image "
          f"{sorted(free.peak_per_image.values())}), {free.seconds:.2f} s; caps "
          f"{PER_IMAGE}/image, {TOTAL} total: peak {capped.peak} (per image "
          f"{sorted(capped.peak_per_image.values())}), {capped.seconds:.2f} s")
    assert capped.owners == owners == free.owners  # two jobs, two conductor processes
    assert 2 <= capped.peak <= TOTAL, capped
    assert all(1 <= p <= PER_IMAGE for p in capped.peak_per_image.values()), capped
    assert capped.seen_waiting, "no host was ever shown waiting for a download slot"
    assert free.peak >= TOTAL, free  # without the caps the same jobs went as wide
    assert download_leases.leases_list(stack.db) == []
