"""Two conductors serving pre-cache jobs side by side: the first step past one conductor.

Two real ``fleetcache-conductor`` processes share the ``conductor`` topic on one vhost of the
machine's RabbitMQ and one PostgreSQL database; ``HOSTS`` real ``fleetcache-compute`` processes
(fake virt driver, each "download" taking ``CACHE_DELAY`` s) register through whichever
conductor the broker hands their call to. One job is sent to each conductor (``server=`` its
host, as a client addresses one member of a topic), each for an image of its own, at the same
moment. Then:

* each job ran on the conductor it was sent to, and the two jobs overlapped in time;
* both jobs end ``done`` with a final state for every host, ``cached`` (the fake driver's
  first call for an image on a host), from records the two conductors wrote to one database;
* every compute's log shows exactly one ``cache_images`` call for each job's image: no host was
  called twice for a job, nor skipped (docs/architecture.md, "Beyond one conductor").
"""

from __future__ import annotations

import concurrent.futures
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetcache.common import rpc
from fleetcache.common.context import get_admin_context
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import jobs
from fleetcache.image import local
from tests.integration.daemons import (
    Deployment,
    conductor_client,
    machine_lock,
    private_vhost,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

VHOST = "/fctest_two_conductors"
URL = f"rabbit://guest:guest@127.0.0.1:5672/{VHOST}"
PG = "postgresql+psycopg2://postgres@127.0.0.1:5432/"
DB_NAME = "fctest_two_conductors"
CONDUCTORS = ("fctest-conductor-a", "fctest-conductor-b")
HOSTS = tuple(f"fctest-2c-compute{i}" for i in range(4))
CACHE_DELAY = 1.0
CONCURRENCY = 2  # per conductor: each job takes about HOSTS / 2 x CACHE_DELAY = 2 s


def _psql(sql: str) -> None:
    result = subprocess.run(["psql", "-h", "127.0.0.1", "-p", "5432", "-U", "postgres", "-w",
                             "-v", "ON_ERROR_STOP=1", "-qtA", "-d", "postgres", "-c", sql],
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"PostgreSQL at 127.0.0.1:5432 refused {sql!r}: "
                             f"{result.stderr}{result.stdout}")


@pytest.fixture
def database() -> Iterator[str]:
    """A fresh PostgreSQL database for the test, dropped after it."""
    with machine_lock(f"{DB_NAME}-postgresql"):
        _psql(f"DROP DATABASE IF EXISTS {DB_NAME}")
        _psql(f"CREATE DATABASE {DB_NAME}")
        try:
            yield PG + DB_NAME
        finally:
            _psql(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")


@pytest.fixture
def deployment(database: str, tmp_path: Path) -> Iterator[tuple[Deployment, list[str]]]:
    """Both conductors and every compute up and registered; :returns: the deployment and one
    image id per conductor, both in the conductors' local image directory."""
    images = tmp_path / "images"
    data = tmp_path / "image-data"
    data.write_bytes(b"two conductors\n")
    image_ids = [str(uuid.uuid4()) for _ in CONDUCTORS]
    for image_id in image_ids:
        local.add_image(str(images), str(data), image_id=image_id, name=image_id[:8])
    extra = (f"[image_source]\nbackend = local\nlocal_directory = {images}\n"
             f"[image_cache]\nprecache_concurrency = {CONCURRENCY}\n"
             f"[fake_driver]\ncache_delay = {CACHE_DELAY}\n")
    with private_vhost(VHOST):
        dep = Deployment(tmp_path, URL, service_down_time=60, extra=extra, db_url=database)
        try:
            conductors = [dep.start_conductor(host) for host in CONDUCTORS]
            for host in HOSTS:
                dep.start_compute(host)
            wait_for(lambda: all(dep.is_up(h) for h in HOSTS), "every compute to register",
                     90, guard=dep.check_running)
            for conductor in conductors:
                wait_for(lambda c=conductor: _serving(c.log(400)),  # type: ignore[misc]
                         f"{conductor.name} to serve RPC", 60, guard=dep.check_running)
            yield dep, image_ids
            dep.check_running()
        finally:
            dep.close()


def _serving(log: str) -> bool:
    """The conductor's RPC server on the default transport has started (its log says so)."""
    return any(": RPC server " in line and line.rstrip().endswith("started")
               for line in log.splitlines())


def _calls(dep: Deployment, host: str, image_id: str) -> int:
    """``cache_images`` calls for ``image_id`` that compute ``host`` logged."""
    text = (dep.workdir / f"{host}.log").read_text(errors="replace")
    return sum(1 for line in text.splitlines()
               if "cache_images: " in line and image_id in line)


def test_two_conductors_run_a_job_each_side_by_side(
        deployment: tuple[Deployment, list[str]]) -> None:
    dep, image_ids = deployment
    aggregate = db_aggregates.aggregate_create(dep.db, "two-conductors")
    for host in HOSTS:
        db_aggregates.aggregate_add_host(dep.db, aggregate["id"], host)
    transports, client = conductor_client(URL)
    try:
        ctxt = get_admin_context()

        def send(conductor: str, image_id: str) -> jobs.JobDict:
            cctxt = rpc.prepare(client, "cache_images", "1.0", server=conductor)
            return cctxt.call(ctxt, "cache_images",  # type: ignore[no-any-return]
                              aggregate_id=aggregate["id"], image_ids=[image_id])

        with concurrent.futures.ThreadPoolExecutor(len(CONDUCTORS)) as pool:
            queued = list(pool.map(send, CONDUCTORS, image_ids))
    finally:
        transports.cleanup()

    def finished() -> bool:
        return all(jobs.job_get(dep.db, j["uuid"])["state"] in (jobs.DONE, jobs.FAILED)
                   for j in queued)

    wait_for(finished, "both jobs to finish", 60, guard=dep.check_running)
    done = [jobs.job_get(dep.db, j["uuid"]) for j in queued]
    assert [j["conductor_host"] for j in done] == list(CONDUCTORS)
    for job, image_id in zip(done, image_ids, strict=True):
        assert job["state"] == jobs.DONE, job["error"]
        states = {(r["host"], r["image_id"]): r["state"] for r in job["results"]}
        assert states == {(h, image_id): "cached" for h in HOSTS}, job["uuid"]
    first, second = done
    assert first["started_at"] is not None and second["started_at"] is not None
    assert first["finished_at"] is not None and second["finished_at"] is not None
    assert first["started_at"] < second["finished_at"]
    assert second["started_at"] < first["finished_at"], "the jobs did not overlap"
    calls = {(h, i): _calls(dep, h, i) for h in HOSTS for i in image_ids}
    assert calls == {key: 1 for key in calls}, calls
