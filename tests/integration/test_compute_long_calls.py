"""A busy compute is never timed out while alive: more long calls than RPC workers.

A real ``fleetcache-compute`` process (fake virt driver whose "download" takes
``CACHE_DELAY`` seconds) serves on the machine's RabbitMQ with only ``WORKERS`` RPC worker
threads. The test opens more concurrent ``cache_images`` calls than that, with the conductor's
call monitor (``call_monitor_timeout = CALL_MONITOR`` s, much shorter than a download).

oslo.messaging sends call-monitor heartbeats only for a call a worker has picked up, so a call
left waiting for a worker gets none and its caller raises ``MessagingTimeout`` after
``CALL_MONITOR`` s although the compute is alive and would have answered. The compute must
instead admit at most ``[compute] max_concurrent_long_calls`` long calls (fewer than its
workers) and answer the others at once with a clear ``error``, and keep answering short calls
while its long calls run.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from oslo_config import cfg

from fleetcache.common import config, exception, rpc
from fleetcache.common.context import get_admin_context
from fleetcache.compute.rpcapi import ComputeAPI
from tests.integration.daemons import Deployment, private_vhost
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

VHOST = "/fctest_daemons"
URL = f"rabbit://guest:guest@127.0.0.1:5672/{VHOST}"
HOST = "fctest-busy-compute"
WORKERS = 3
LONG_CALLS = 2
CALLS = 5
CACHE_DELAY = 8
CALL_MONITOR = 2


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    with private_vhost(VHOST):
        yield VHOST


@pytest.fixture
def compute_api(vhost: str, tmp_path: Path) -> Iterator[ComputeAPI]:
    extra = (f"[DEFAULT]\nexecutor_thread_pool_size = {WORKERS}\n"
             f"[compute]\nmax_concurrent_long_calls = {LONG_CALLS}\n"
             f"[fake_driver]\ncache_delay = {CACHE_DELAY}\n")
    dep = Deployment(tmp_path, URL, extra=extra)
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    rpc.register_opts(conf)
    conf([], project="fleetcache", default_config_files=[])
    conf.set_override("rpc_response_timeout", CALL_MONITOR)
    conf.set_override("long_rpc_timeout", 120)
    transports = rpc.Transports(conf)
    try:
        compute = dep.start_compute(HOST)
        api = ComputeAPI(conf, transports.get(URL))
        # Its RPC server answers: a short call (the fake driver makes no instance disks).
        wait_for(lambda: _answers(api), "the compute to serve RPC", 60,
                 guard=compute.assert_running)
        yield api
        compute.assert_running()
    finally:
        dep.close()
        transports.cleanup()


def _answers(api: ComputeAPI) -> bool:
    try:
        api.delete_instance_disk(get_admin_context(), HOST,
                                 "00000000-0000-0000-0000-000000000000")
    except exception.InstanceDisksNotSupported:
        return True
    except Exception:
        return False
    return True


def test_more_long_calls_than_workers_all_answer_none_times_out(compute_api: ComputeAPI) -> None:
    ctxt = get_admin_context()
    with concurrent.futures.ThreadPoolExecutor(CALLS) as pool:
        started = time.monotonic()
        futures = [pool.submit(compute_api.cache_images, ctxt, HOST, [f"image-{i}"])
                   for i in range(CALLS)]
        time.sleep(1)  # the long calls are in: every worker that takes one is now busy
        short_began = time.monotonic()
        assert _answers(compute_api), "a short call was not answered while long calls ran"
        short_took = time.monotonic() - short_began
        outcomes = []
        for future in futures:
            result = future.result()  # a MessagingTimeout here is the defect
            outcomes.append(next(iter(result.values())))
        elapsed = time.monotonic() - started

    cached = [o for o in outcomes if o["state"] == "cached"]
    refused = [o for o in outcomes if o["state"] == "error"]
    assert len(cached) == LONG_CALLS, outcomes
    assert len(refused) == CALLS - LONG_CALLS, outcomes
    for outcome in refused:
        assert "busy" in (outcome["reason"] or ""), outcome
        assert "max_concurrent_long_calls" in (outcome["reason"] or ""), outcome
    assert short_took < CALL_MONITOR, f"a short call waited {short_took:.1f} s"
    assert elapsed < CACHE_DELAY + 10, f"the calls took {elapsed:.1f} s"
