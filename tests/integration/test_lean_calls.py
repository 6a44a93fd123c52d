"""The conductor's lean caller against real oslo.messaging RPC servers on the real RabbitMQ.

Each test serves a ``compute`` endpoint with fleetcache's own RPC server (oslo.messaging's
threading server and the call monitor of :mod:`fleetcache.common.callmonitor`, as a compute
runs it) on a private vhost, and calls it through
:class:`~fleetcache.common.leanamqp.caller.AmqpCaller` the way the conductor does
(:class:`~fleetcache.conductor.leancompute.LeanComputeAPI`).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import oslo_messaging as messaging
import pytest
from oslo_config import cfg

from fleetcache.cmd.common import register_messaging_opts
from fleetcache.common import config, exception, rpc
from fleetcache.common.context import RequestContext, get_admin_context
from fleetcache.common.leanamqp import broker
from fleetcache.common.leanamqp.caller import AmqpCaller
from fleetcache.conductor.leancompute import LeanComputeAPI
from tests.integration.daemons import private_vhost, wait_for

pytestmark = pytest.mark.integration

VHOST = "/fctest_lean"
URL = f"rabbit://guest:guest@127.0.0.1:5672/{VHOST}"
HOST = "fctest-lean-compute"
CALL_MONITOR = 2


class NotAllowedError(Exception):
    """An exception of a module the caller may not re-create: ``RemoteError``."""


class Endpoint:
    """A compute's ``cache_images`` whose behaviour the test picks by image id."""

    target = messaging.Target(version="1.2")

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], Any]] = []
        self.release = threading.Event()

    @rpc.expected_exceptions(exception.Invalid)
    def cache_images(self, ctxt: RequestContext, image_ids: list[str],
                     pin_until: float | None = None) -> dict[str, Any]:
        self.calls.append((image_ids, pin_until))
        if "invalid" in image_ids:
            raise exception.InvalidInput(reason="bad image")
        if "boom" in image_ids:
            raise ValueError("boom from the compute")
        if "odd" in image_ids:
            raise NotAllowedError("odd from the compute")
        if "slow" in image_ids:  # longer than the call monitor: kept alive by heartbeats
            time.sleep(3 * CALL_MONITOR)
        if "held" in image_ids:
            self.release.wait(60)
        return {i: {"state": "existing", "reason": ctxt.request_id, "bytes_downloaded": 0}
                for i in image_ids}


@pytest.fixture(scope="module")
def vhost() -> Iterator[str]:
    with private_vhost(VHOST):
        yield VHOST


@pytest.fixture
def conf() -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    register_messaging_opts(conf)
    conf([], project="fleetcache", default_config_files=[])
    conf.set_override("rpc_response_timeout", CALL_MONITOR)
    conf.set_override("long_rpc_timeout", 60)
    broker.register_opts(conf)
    conf.set_override("rabbit_retry_interval", 1, group="oslo_messaging_rabbit")
    return conf


@pytest.fixture
def served(vhost: str, conf: cfg.ConfigOpts) -> Iterator[tuple[Endpoint, LeanComputeAPI]]:
    transports = rpc.Transports(conf)
    endpoint = Endpoint()
    server = rpc.get_server(transports.get(URL), "compute", HOST, [endpoint])
    server.start()
    caller = AmqpCaller(broker.params_for(conf, URL), rpc.ALLOWED_EXMODS, name="lean-test")
    api = LeanComputeAPI(conf, transports.get(URL), caller)
    try:
        yield endpoint, api
    finally:
        endpoint.release.set()
        caller.close()
        server.stop()
        server.wait()
        transports.cleanup()


def test_a_reply_comes_back_with_the_context(
        served: tuple[Endpoint, LeanComputeAPI]) -> None:
    endpoint, api = served
    ctxt = get_admin_context()
    replies = api.cache_images(ctxt, HOST, ["a", "b"], pin_until=123.5)
    assert replies == {i: {"state": "existing", "reason": ctxt.request_id,
                           "bytes_downloaded": 0} for i in ("a", "b")}
    assert endpoint.calls == [(["a", "b"], 123.5)]


def test_many_calls_in_flight_each_get_their_own_reply(
        served: tuple[Endpoint, LeanComputeAPI]) -> None:
    _endpoint, api = served
    results: dict[int, Any] = {}

    def one(i: int) -> None:
        results[i] = api.cache_images(get_admin_context(), HOST, [f"img-{i}"])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results) == list(range(40))
    assert all(list(r) == [f"img-{i}"] for i, r in results.items())


def test_remote_exceptions_as_oslo_messaging_raises_them(
        served: tuple[Endpoint, LeanComputeAPI]) -> None:
    _endpoint, api = served
    with pytest.raises(exception.InvalidInput, match="bad image"):
        api.cache_images(get_admin_context(), HOST, ["invalid"])
    with pytest.raises(ValueError, match="boom from the compute"):  # built-ins are allowed
        api.cache_images(get_admin_context(), HOST, ["boom"])
    with pytest.raises(messaging.RemoteError) as info:
        api.cache_images(get_admin_context(), HOST, ["odd"])
    assert info.value.exc_type == "NotAllowedError"
    assert str(info.value).startswith("Remote error: NotAllowedError odd from the compute")


def test_a_dead_compute_times_out_within_the_call_monitor(
        served: tuple[Endpoint, LeanComputeAPI]) -> None:
    _endpoint, api = served
    began = time.monotonic()
    with pytest.raises(messaging.MessagingTimeout):
        api.cache_images(get_admin_context(), "fctest-no-such-compute", ["a"])
    assert CALL_MONITOR - 0.1 <= time.monotonic() - began < CALL_MONITOR + 1.5


def test_a_long_call_is_kept_alive_by_heartbeats(
        served: tuple[Endpoint, LeanComputeAPI]) -> None:
    _endpoint, api = served
    began = time.monotonic()
    replies = api.cache_images(get_admin_context(), HOST, ["slow"])
    assert replies["slow"]["state"] == "existing"
    assert time.monotonic() - began >= 3 * CALL_MONITOR


def test_the_version_cap_refuses_a_pin(vhost: str, conf: cfg.ConfigOpts) -> None:
    conf.set_override("compute", "1.1", group="upgrade_levels")
    transports = rpc.Transports(conf)
    caller = AmqpCaller(broker.params_for(conf, URL), rpc.ALLOWED_EXMODS)
    try:
        api = LeanComputeAPI(conf, transports.get(URL), caller)
        with pytest.raises(exception.RPCVersionCapped):
            api.cache_images(get_admin_context(), HOST, ["a"], pin_until=1.0)
    finally:
        caller.close()
        transports.cleanup()


def _close_connection(name_part: str) -> None:
    """Close the broker connection whose client-given name contains ``name_part``."""
    out = subprocess.run(["rabbitmqctl", "-q", "list_connections", "pid", "client_properties"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    pids = [line.split("\t")[0] for line in out.splitlines() if name_part in line]
    assert len(pids) == 1, out
    subprocess.run(["rabbitmqctl", "close_connection", pids[0], "closed by the test"],
                   capture_output=True, check=True, timeout=60)


def test_a_connection_closed_mid_call_reconnects_and_the_reply_arrives(
        served: tuple[Endpoint, LeanComputeAPI]) -> None:
    endpoint, api = served
    api.cache_images(get_admin_context(), HOST, ["warm-up"])  # the connection is open
    result: dict[str, Any] = {}

    def call() -> None:
        try:
            result["reply"] = api.cache_images(get_admin_context(), HOST, ["held"])
        except Exception as exc:  # noqa: BLE001 - asserted below
            result["error"] = exc

    thread = threading.Thread(target=call)
    thread.start()
    wait_for(lambda: any(c[0] == ["held"] for c in endpoint.calls), 10, "the call to arrive")
    _close_connection(api.caller.reply_q)
    # The server answers while the caller reconnects: the reply waits in the named queue.
    endpoint.release.set()
    thread.join(30)
    assert result.get("reply") == {"held": {"state": "existing", "reason": result["reply"]
                                            ["held"]["reason"], "bytes_downloaded": 0}}, result
    assert api.caller.connects >= 2  # reconnected (once, unless the close raced a read)
    # And the caller goes on calling.
    assert api.cache_images(get_admin_context(), HOST, ["after"])["after"]["state"] == "existing"


def test_rounds_of_concurrent_calls_never_wait_for_a_lost_wake_up(
        served: tuple[Endpoint, LeanComputeAPI]) -> None:
    """Each round of 400 calls from 16 threads takes well under a second or two; a lost
    wake-up of the connection's thread left a call waiting for the next heartbeat check
    (20 s) in about one round of three."""
    _endpoint, api = served
    for _round in range(4):
        began = time.monotonic()

        def calls() -> None:
            for _ in range(25):
                api.cache_images(get_admin_context(), HOST, ["a"])

        threads = [threading.Thread(target=calls) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert time.monotonic() - began < 10
