"""RabbitMQ connections recover after the broker restarts.

The test starts its OWN RabbitMQ node (``tools/rabbitmq-node.sh``: port 5673, node
``fctest@localhost``, data under a temporary directory), never the machine's shared one. A
conductor and a compute run on it; the node is stopped and started again; the compute must
heartbeat again (its service is up with a heartbeat newer than the restart) and an RPC call to
the compute must work.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from oslo_config import cfg

from fleetcache.common import config, rpc
from fleetcache.common.context import get_admin_context
from fleetcache.common.db.models import utcnow
from fleetcache.compute.rpcapi import ComputeAPI
from tests.integration.daemons import ROOT, Deployment, machine_lock
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

NODE_SH = ROOT / "tools" / "rabbitmq-node.sh"
PORT = 5673
URL = f"rabbit://guest:guest@127.0.0.1:{PORT}/"
HOST = "fctest-restart-compute"


class Node:
    """The private RabbitMQ node, with its data in ``base``."""

    def __init__(self, base: Path) -> None:
        self.env = {**os.environ, "FCTEST_RABBIT_BASE": str(base)}

    def run(self, action: str) -> None:
        result = subprocess.run([str(NODE_SH), action], env=self.env, capture_output=True,
                                text=True, timeout=180)
        if result.returncode != 0:
            pytest.fail(f"tools/rabbitmq-node.sh {action} failed ({result.returncode}):\n"
                        f"{result.stdout}{result.stderr}")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    with machine_lock("fctest_rabbitmq_node"):
        node = Node(tmp_path_factory.mktemp("rabbitmq"))
        node.run("start")
        try:
            yield node
        finally:
            node.run("purge")


@pytest.fixture
def deployment(node: Node, tmp_path: Path) -> Iterator[Deployment]:
    dep = Deployment(tmp_path, URL, report_interval=1, service_down_time=10)
    yield dep
    dep.close()


@pytest.fixture
def compute_api() -> Iterator[ComputeAPI]:
    """The test's own client of the compute, on a transport of its own."""
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    rpc.register_opts(conf)
    conf([], project="fleetcache", default_config_files=[])
    conf.set_override("rpc_response_timeout", 5)
    conf.set_override("long_rpc_timeout", 10)
    transports = rpc.Transports(conf)
    yield ComputeAPI(conf, transports.get(URL))
    transports.cleanup()


def _call_until_answered(api: ComputeAPI, image_id: str, timeout: float) -> tuple[str, int]:
    """Call the compute until it answers (its queue may need a moment to be declared again
    after the broker came back); :returns: the image's state and the attempts it took."""
    deadline = time.monotonic() + timeout
    attempts = 0
    while True:
        attempts += 1
        try:
            result = api.cache_images(get_admin_context(), HOST, [image_id])
            return result[image_id]["state"], attempts
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def test_daemons_recover_after_the_broker_restarts(
        node: Node, deployment: Deployment, compute_api: ComputeAPI) -> None:
    dep = deployment
    conductor = dep.start_conductor()
    compute = dep.start_compute(HOST)
    wait_for(lambda: dep.is_up(HOST), "compute up before the restart", 60, guard=dep.check_running)
    api = compute_api
    assert _call_until_answered(api, "before", 30)[0] == "cached"

    node.run("stop")
    time.sleep(2)
    conductor.assert_running()  # losing the broker is not fatal
    compute.assert_running()
    node.run("start")
    restarted_at = utcnow()

    def heartbeat_after_restart() -> bool:
        svc = dep.service(HOST)
        return (svc is not None and svc["last_seen_up"] is not None
                and svc["last_seen_up"] > restarted_at and dep.is_up(HOST))

    wait_for(heartbeat_after_restart, "a compute heartbeat after the broker restart", 90,
             guard=dep.check_running)
    state, attempts = _call_until_answered(api, "after", 60)
    assert state == "cached", attempts

    assert compute.terminate(30) == 0, compute.log()
    assert conductor.terminate(30) == 0, conductor.log()
