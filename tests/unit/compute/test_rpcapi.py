"""Unit tests of the compute RPC client (fleetcache.compute.rpcapi): versions it sends."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import oslo_messaging as messaging
import pytest
from oslo_config import cfg

from fleetcache.common import exception, rpc
from fleetcache.common.context import RequestContext
from fleetcache.compute import rpcapi
from tests.unit.image.fixtures import make_conf

CTXT = RequestContext()


class OldCompute:
    """A compute that still serves 1.0 only."""

    target = messaging.Target(version="1.0")

    def cache_images(self, ctxt: Any, image_ids: list[str]) -> dict[str, Any]:
        return {i: {"state": "existing", "reason": None, "bytes_downloaded": 0}
                for i in image_ids}


@pytest.fixture
def conf() -> cfg.ConfigOpts:
    return make_conf(host=f"h-{uuid.uuid4().hex[:8]}", long_rpc_timeout=2)


@pytest.fixture
def old_compute(conf: cfg.ConfigOpts) -> Iterator[messaging.Transport]:
    transports = rpc.Transports(conf)
    transport = transports.get("fake:///")
    server = rpc.get_server(transport, rpcapi.TOPIC, conf.host, [OldCompute()])
    server.start()
    yield transport
    server.stop()
    server.wait()
    transports.cleanup()


def test_capped_client_refuses_1_1_methods_before_sending(
        conf: cfg.ConfigOpts, old_compute: messaging.Transport) -> None:
    conf.set_override("compute", "1.0", group="upgrade_levels")
    client = rpcapi.ComputeAPI(conf, old_compute)
    with pytest.raises(exception.RPCVersionCapped, match=r"capped at version 1\.0.*"
                       r"create_instance_disk needs 1\.1"):
        client.create_instance_disk(CTXT, conf.host, str(uuid.uuid4()), "img")
    with pytest.raises(exception.RPCVersionCapped, match="delete_instance_disk"):
        client.delete_instance_disk(CTXT, conf.host, str(uuid.uuid4()))
    assert client.cache_images(CTXT, conf.host, ["a"])["a"]["state"] == "existing"


def test_uncapped_client_sends_1_1_only_for_the_new_methods(
        conf: cfg.ConfigOpts, old_compute: messaging.Transport) -> None:
    client = rpcapi.ComputeAPI(conf, old_compute)
    assert client.version_cap == rpcapi.RPC_API_VERSION == "1.7"
    assert client.cache_images(CTXT, conf.host, ["a"])["a"]["state"] == "existing"
    with pytest.raises(messaging.UnsupportedVersion):  # the 1.0 server says so
        client.delete_instance_disk(CTXT, conf.host, str(uuid.uuid4()))


def test_cache_images_asks_for_1_2_only_with_a_pin(
        conf: cfg.ConfigOpts, old_compute: messaging.Transport) -> None:
    client = rpcapi.ComputeAPI(conf, old_compute)
    assert client.cache_images(CTXT, conf.host, ["a"])["a"]["state"] == "existing"
    with pytest.raises(messaging.UnsupportedVersion):  # the 1.0 server says so
        client.cache_images(CTXT, conf.host, ["a"], pin_until=2e9)
    conf.set_override("compute", "1.1", group="upgrade_levels")
    capped = rpcapi.ComputeAPI(conf, old_compute)
    with pytest.raises(exception.RPCVersionCapped, match=r"cache_images needs 1\.2"):
        capped.cache_images(CTXT, conf.host, ["a"], pin_until=2e9)


class UptimeCompute:
    target = messaging.Target(version="1.3")

    def get_host_uptime(self, ctxt: Any) -> str:
        return " 10:00:00 up 1 min,  0 users,  load average: 0.00, 0.00, 0.00"


def test_get_host_uptime_is_a_1_3_call(conf: cfg.ConfigOpts) -> None:
    transports = rpc.Transports(conf)
    transport = transports.get("fake:///")
    server = rpc.get_server(transport, rpcapi.TOPIC, conf.host, [UptimeCompute()])
    server.start()
    try:
        client = rpcapi.ComputeAPI(conf, transport)
        assert client.get_host_uptime(CTXT, conf.host).startswith(" 10:00:00 up 1 min")
        conf.set_override("compute", "1.2", group="upgrade_levels")
        with pytest.raises(exception.RPCVersionCapped, match=r"get_host_uptime needs 1\.3"):
            rpcapi.ComputeAPI(conf, transport).get_host_uptime(CTXT, conf.host)
    finally:
        server.stop()
        server.wait()
        transports.cleanup()


def test_get_host_uptime_of_a_compute_before_1_3_is_refused(
        conf: cfg.ConfigOpts, old_compute: messaging.Transport) -> None:
    with pytest.raises(messaging.UnsupportedVersion):  # the 1.0 server says so
        rpcapi.ComputeAPI(conf, old_compute).get_host_uptime(CTXT, conf.host)


def test_cache_images_asks_for_1_4_only_with_peers_and_serve_images_needs_it(
        conf: cfg.ConfigOpts, old_compute: messaging.Transport) -> None:
    client = rpcapi.ComputeAPI(conf, old_compute)
    assert client.takes_peers
    assert client.cache_images(CTXT, conf.host, ["a"], peers={})["a"]["state"] == "existing"
    peer = rpcapi.Peer(host="h2", url="http://h2:8790", authorization="FleetcachePeer x.y")
    with pytest.raises(messaging.UnsupportedVersion):  # the 1.0 server says so
        client.cache_images(CTXT, conf.host, ["a"], peers={"a": [peer]})
    conf.set_override("compute", "1.3", group="upgrade_levels")
    capped = rpcapi.ComputeAPI(conf, old_compute)
    assert not capped.takes_peers
    with pytest.raises(exception.RPCVersionCapped, match=r"cache_images needs 1\.4"):
        capped.cache_images(CTXT, conf.host, ["a"], peers={"a": [peer]})
    with pytest.raises(exception.RPCVersionCapped, match=r"serve_images needs 1\.4"):
        capped.serve_images(CTXT, conf.host, "job", "k" * 64, ["a"], 2e9)


def test_cache_images_asks_for_1_5_only_with_terms(
        conf: cfg.ConfigOpts, old_compute: messaging.Transport) -> None:
    client = rpcapi.ComputeAPI(conf, old_compute)
    assert client.takes_terms
    assert client.cache_images(CTXT, conf.host, ["a"], until=None,
                               bytes_per_second=None)["a"]["state"] == "existing"
    for terms in ({"until": 2e9}, {"bytes_per_second": 8 << 20}):
        with pytest.raises(messaging.UnsupportedVersion):  # the 1.0 server says so
            client.cache_images(CTXT, conf.host, ["a"], **terms)  # type: ignore[arg-type]
    conf.set_override("compute", "1.4", group="upgrade_levels")
    capped = rpcapi.ComputeAPI(conf, old_compute)
    assert not capped.takes_terms and capped.takes_peers
    for terms in ({"until": 2e9}, {"bytes_per_second": 8 << 20}):
        with pytest.raises(exception.RPCVersionCapped, match=r"cache_images needs 1\.5"):
            capped.cache_images(CTXT, conf.host, ["a"], **terms)  # type: ignore[arg-type]


@pytest.mark.parametrize(("option", "version", "reports", "below"), [
    ("origin_after_refused_peers", "1.6", "reports_refused_peers", "1.5"),
    ("origin_after_failed_peers", "1.7", "reports_failed_peers", "1.6"),
])
def test_cache_images_asks_for_a_version_only_to_have_peers_handed_back(
        conf: cfg.ConfigOpts, old_compute: messaging.Transport, option: str, version: str,
        reports: str, below: str) -> None:
    """Refused peer bytes (1.6) and failed peers (1.7) come back only when asked."""
    client = rpcapi.ComputeAPI(conf, old_compute)
    assert getattr(client, reports)
    assert client.cache_images(CTXT, conf.host, ["a"],
                               **{option: True})["a"]["state"] == "existing"
    with pytest.raises(messaging.UnsupportedVersion):  # the 1.0 server says so
        client.cache_images(CTXT, conf.host, ["a"], **{option: False})
    conf.set_override("compute", below, group="upgrade_levels")
    capped = rpcapi.ComputeAPI(conf, old_compute)
    assert not getattr(capped, reports) and capped.takes_terms
    with pytest.raises(exception.RPCVersionCapped,
                       match=rf"cache_images needs {re.escape(version)}"):
        capped.cache_images(CTXT, conf.host, ["a"], **{option: False})
