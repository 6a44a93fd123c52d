"""A conductor serving several cells exits promptly on SIGTERM, however its cells' reply
queues are timed.

A real ``fleetcache-conductor`` serves a default vhost and ``CELLS`` cell vhosts of the
machine's RabbitMQ, one real ``fleetcache-compute`` (fake driver) in each cell. The conductor
calls each cell's compute through oslo.messaging, so each cell transport has a reply
queue and a thread consuming it. The calls are made one cell after another, ``GAP`` seconds
apart, last cell first; after ``IDLE`` seconds every consumer waits 5 s at a time
(oslo.messaging's ``ACK_REQUEUE_EVERY_SECONDS_MAX``), each cell's wait ending a little after
the next cell's.

Closing the transports one after another then waits out nearly a whole 5 s per cell: this
test measured 21.9 s from SIGTERM to exit (twice, on the 2-vCPU test machine). Side by side
(``Transports.cleanup``) it measured 7.2-7.3 s: the RPC servers' own stop (up to 5 s, already
side by side) plus the longest reply consumer's wait.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fleetcache.common.context import get_admin_context
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import jobs
from fleetcache.image import local
from tests.integration.daemons import Deployment, conductor_client, private_vhost
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

BROKER = "rabbit://guest:guest@127.0.0.1:5672/"
VHOST = "/fctest_stop_cells"
CELLS = 4
GAP = 0.5
#: Seconds of quiet before SIGTERM: the reply consumers' waits double from 1 ms up to 5 s,
#: which takes about 8 s.
IDLE = 10.0
#: Seconds from SIGTERM to exit: above the 5 s + 5 s of the servers' stop and the reply
#: consumers' (side by side), below the 4 x 4.x s of the consumers one after another.
STOP_BOUND = 12.0


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[tuple[Deployment, list[str], str]]:
    """The conductor and one registered compute per cell, each compute in an aggregate of
    its own; :returns: the deployment, those aggregates' hosts (cell 1 first) and an image
    id in the conductor's local image directory."""
    images = tmp_path / "images"
    data = tmp_path / "image-data"
    data.write_bytes(b"several cells\n")
    image_id = str(uuid.uuid4())
    local.add_image(str(images), str(data), image_id=image_id, name="stop")
    extra = (f"[image_source]\nbackend = local\nlocal_directory = {images}\n")
    vhosts = [f"{VHOST}_cell{n}" for n in range(1, CELLS + 1)]
    with contextlib.ExitStack() as stack:
        for vhost in (VHOST, *vhosts):
            stack.enter_context(private_vhost(vhost))
        dep = Deployment(tmp_path, BROKER + VHOST, service_down_time=60, extra=extra)
        stack.callback(dep.close)
        hosts = []
        for n, vhost in enumerate(vhosts, start=1):
            dep.manage("cell", "create", "--name", f"cell{n}", "--transport-url",
                       BROKER + vhost)
            hosts.append(f"fctest-stop-cell{n}")
            dep.start_compute(hosts[-1], transport_url=BROKER + vhost)
        dep.start_conductor()
        wait_for(lambda: all(dep.is_up(h) for h in hosts), "every compute to register", 90,
                 guard=dep.check_running)
        for host in hosts:
            aggregate = db_aggregates.aggregate_create(dep.db, host)
            db_aggregates.aggregate_add_host(dep.db, aggregate["id"], host)
        yield dep, hosts, image_id


def _cache_images(client: Any, dep: Deployment, host: str, image_id: str) -> None:
    """A pre-cache job on ``host``'s aggregate, to its end."""
    aggregate = next(a for a in db_aggregates.aggregate_list(dep.db) if a["name"] == host)
    job = client.prepare().call(get_admin_context(), "cache_images",
                                aggregate_id=aggregate["id"], image_ids=[image_id])
    wait_for(lambda: jobs.job_get(dep.db, job["uuid"])["state"] in (jobs.DONE, jobs.FAILED),
             f"the job on {host} to end", 60, guard=dep.check_running)
    assert jobs.job_get(dep.db, job["uuid"])["state"] == jobs.DONE


def test_conductor_with_several_cells_exits_within_the_bound(
        deployment: tuple[Deployment, list[str], str]) -> None:
    dep, hosts, image_id = deployment
    transports, client = conductor_client(dep.transport_url)
    try:
        for host in reversed(hosts):  # the last cell's reply queue goes quiet first
            _cache_images(client, dep, host, image_id)
            time.sleep(GAP)
    finally:
        transports.cleanup()
    time.sleep(IDLE)
    conductor = next(d for d in dep.daemons if d.name == "conductor")
    conductor.assert_running()

    began = time.monotonic()
    code = conductor.terminate(timeout=60)
    took = time.monotonic() - began
    assert code == 0, conductor.log()
    assert took < STOP_BOUND, f"the conductor took {took:.1f} s to exit:\n{conductor.log()}"
    print(f"conductor with {CELLS} cells exited {took:.2f} s after SIGTERM")
