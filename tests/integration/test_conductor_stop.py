"""The stack's conductor stops promptly on SIGTERM, even with a host call in flight.

``tools/stack.sh stop`` sends SIGTERM and SIGKILLs after 15 s. The conductor is stopped while
a pre-cache job waits on compute1, frozen with SIGSTOP (its ``cache_images`` call cannot
answer): the conductor must exit by itself well within that limit, without writing the stack
dump a stop still running after 10 s writes (``fleetcache.common.service``), and the next
conductor takes the job over and ends it once compute1 runs again.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.integration.stackops import frozen
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

MV = "2.81"
HOST = "compute1"
#: Seconds a stop may take: the stack SIGKILLs at 15 s; a stop measured 1-5 s on this machine.
STOP_BOUND = 10.0


def _job(stack: Any, path: str) -> dict[str, Any]:
    return dict(stack.api_request("GET", path, microversion=MV).json()["job"])


def _pid(stack: Any) -> str:
    return str((stack.dir / "run" / "conductor.pid").read_text().split()[0])


def test_conductor_stops_promptly_with_a_host_call_in_flight(stack: Any,
                                                             make_aggregate: Any) -> None:
    agg = make_aggregate(hosts=(HOST,))
    log = stack.log_file("conductor")
    offset = log.stat().st_size
    old_pid = _pid(stack)
    with frozen(stack, HOST):
        resp = stack.api_request("POST", f"os-aggregates/{agg['id']}/images", microversion=MV,
                                 json={"cache": [{"id": stack.sample_images[1]}]})
        assert resp.status_code == 202, resp.text
        path = resp.headers["Location"].split("/v2.1/", 1)[1]
        wait_for(lambda: _job(stack, path)["state"] == "running", "the job to run", 30)
        time.sleep(1.0)  # the call to the frozen compute is in flight
        assert _job(stack, path)["hosts"] == []

        started = time.monotonic()
        stack.stop_service("conductor")
        took = time.monotonic() - started
    stack.start_service("conductor")
    with open(log, "rb") as handle:
        handle.seek(offset)
        written = handle.read().decode(errors="replace").splitlines()
    assert any(f" {old_pid} " in line and "caught SIGTERM, stopping" in line
               for line in written), written[-5:]
    assert not any(line.startswith("Timeout (") for line in written), (
        "the conductor wrote its stack dump: its stop took over 10 s")
    assert took < STOP_BOUND, f"the conductor took {took:.1f} s to stop"
    print(f"conductor stopped {took:.2f} s after SIGTERM with a host call in flight")

    mark = re.compile(rf"^\S+ \S+ {_pid(stack)} .*fleetcache-conductor on \S+: registered")
    wait_for(lambda: any(mark.match(line) for line in log.read_text().splitlines()),
             "the new conductor to register", 60)
    job = _job(stack, path)
    wait_for(lambda: _job(stack, path)["state"] == "done", f"the job taken over to end: {job}",
             120)
    job = _job(stack, path)
    assert [h["images"][0]["state"] for h in job["hosts"]] in (["cached"], ["existing"]), job
