"""Real conductor and compute processes on the machine's RabbitMQ (vhost ``/fctest_daemons``).

A compute killed with SIGKILL is reported down within ``service_down_time`` and up again
after a restart; the daemons register through the conductor, map to the cell whose broker
they use, and exit 0 on SIGTERM.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.daemons import CONDUCTOR, VENV_BIN, Deployment, private_vhost
from tests.waiting import seconds_until, wait_for

pytestmark = pytest.mark.integration

VHOST = "/fctest_daemons"
# NOTE: in a transport URL the path after the host's "/" is the vhost: "//fctest_daemons".
URL = f"rabbit://guest:guest@127.0.0.1:5672/{VHOST}"
REPORT_INTERVAL = 1
SERVICE_DOWN_TIME = 5
MARGIN = 3


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    with private_vhost(VHOST):
        yield VHOST


@pytest.fixture
def deployment(vhost: str, tmp_path: Path) -> Iterator[Deployment]:
    dep = Deployment(tmp_path, URL, REPORT_INTERVAL, SERVICE_DOWN_TIME)
    yield dep
    dep.close()


def test_killed_compute_is_down_within_service_down_time_and_up_after_restart(
    deployment: Deployment,
) -> None:
    dep = deployment
    # The cell whose broker the daemons use: registrations through it map to this cell.
    dep.manage("cell", "create", "--name", "cell1", "--transport-url", URL)
    conductor = dep.start_conductor()
    compute = dep.start_compute("fctest-compute-1")
    wait_for(lambda: dep.is_up("fctest-compute-1"), "compute registered and up", 60,
             guard=dep.check_running)
    svc = dep.service("fctest-compute-1")
    assert svc is not None and svc["cell"] is not None and svc["cell"]["name"] == "cell1"
    assert dep.is_up("fctest-conductor", CONDUCTOR)

    compute.signal(signal.SIGKILL)
    assert compute.wait(10) == -signal.SIGKILL
    killed_at = time.monotonic()
    took = seconds_until(lambda: not dep.is_up("fctest-compute-1"), "killed compute reported down",
                    SERVICE_DOWN_TIME + MARGIN, guard=dep.check_running)
    assert time.monotonic() - killed_at >= SERVICE_DOWN_TIME - REPORT_INTERVAL - 1, took

    restarted = dep.start_compute("fctest-compute-1")
    wait_for(lambda: dep.is_up("fctest-compute-1"), "restarted compute up again", 60,
             guard=dep.check_running)
    assert "Registered with the conductor" in restarted.log(500)

    assert restarted.terminate(30) == 0, restarted.log()
    assert conductor.terminate(30) == 0, conductor.log()


def test_compute_waits_for_a_conductor_and_registers_when_one_starts(
    deployment: Deployment,
) -> None:
    dep = deployment
    compute = dep.start_compute("fctest-compute-2")
    # Calls queue up in RabbitMQ until a conductor consumes them or they expire
    # (rpc_response_timeout): wait for one attempt to have failed before starting it.
    wait_for(lambda: "registration attempt 1 failed" in compute.log(500),
             "a failed registration attempt", 30, guard=compute.assert_running)
    assert dep.service("fctest-compute-2") is None
    conductor = dep.start_conductor()
    wait_for(lambda: dep.is_up("fctest-compute-2"), "compute registered after retrying", 60,
             guard=dep.check_running)
    svc = dep.service("fctest-compute-2")
    assert svc is not None and svc["cell"] is None  # the default transport is no cell's here
    assert compute.terminate(30) == 0, compute.log()
    assert conductor.terminate(30) == 0, conductor.log()


def test_bad_configuration_fails_at_start_naming_the_option(deployment: Deployment) -> None:
    dep = deployment
    conf = dep.workdir / "bad.conf"
    conf.write_text(dep.conductor_conf.read_text().replace(
        "report_interval = 1", "report_interval = soon"))
    for binary in ("fleetcache-conductor", "fleetcache-compute"):
        result = subprocess.run([str(VENV_BIN / binary), "--config-file", str(conf)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, result.stderr
        assert "[DEFAULT] report_interval" in result.stderr
        assert "Traceback" not in result.stderr
