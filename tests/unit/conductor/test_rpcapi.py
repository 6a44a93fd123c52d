"""Unit tests of the conductor RPC client (fleetcache.conductor.rpcapi): versions it sends."""

from __future__ import annotations

import threading
import time
from typing import Any

import oslo_messaging as messaging
import pytest

from fleetcache.common import exception, rpc
from fleetcache.common.context import RequestContext
from fleetcache.conductor import rpcapi
from tests.unit.image.fixtures import make_conf

CTXT = RequestContext()


class Conductor:
    target = messaging.Target(version="1.2")

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []
        self.aggregate_syncs: list[str] = []
        self.got = threading.Event()

    def report_image_cache(self, ctxt: Any, **kwargs: Any) -> None:
        self.reports.append(kwargs)
        self.got.set()

    def sync_host_aggregates(self, ctxt: Any, host: str) -> None:
        self.aggregate_syncs.append(host)
        self.got.set()


def test_report_image_cache_is_a_1_1_cast_with_a_timestamp() -> None:
    conf = make_conf()
    transports = rpc.Transports(conf)
    transport = transports.get("fake:///")
    endpoint = Conductor()
    server = rpc.get_server(transport, rpcapi.TOPIC, "conductor-1", [endpoint])
    server.start()
    try:
        before = time.time()
        images = [{"image_id": "a", "size": 1, "last_used": 5.0}]
        assert rpcapi.ConductorAPI(conf, transport).report_image_cache(
            CTXT, "h1", images, 4096) is None  # type: ignore[func-returns-value, arg-type]
        assert endpoint.got.wait(5)
    finally:
        server.stop()
        server.wait()
        transports.cleanup()
    [report] = endpoint.reports
    assert report["host"] == "h1" and report["images"] == images
    assert report["usage_bytes"] == 4096 and report["reported_at"] >= before


def test_capped_client_does_not_report() -> None:
    conf = make_conf(upgrade_levels__conductor="1.0")
    transports = rpc.Transports(conf)
    client = rpcapi.ConductorAPI(conf, transports.get("fake:///"))
    with pytest.raises(exception.RPCVersionCapped, match="report_image_cache needs 1.1"):
        client.report_image_cache(CTXT, "h1", [], 0)
    transports.cleanup()


def test_sync_host_aggregates_is_a_1_2_cast() -> None:
    conf = make_conf()
    transports = rpc.Transports(conf)
    transport = transports.get("fake:///")
    endpoint = Conductor()
    server = rpc.get_server(transport, rpcapi.TOPIC, "conductor-1", [endpoint])
    server.start()
    try:
        rpcapi.ConductorAPI(conf, transport).sync_host_aggregates(CTXT, "h1")
        assert endpoint.got.wait(5)
    finally:
        server.stop()
        server.wait()
        transports.cleanup()
    assert endpoint.aggregate_syncs == ["h1"]


def test_client_capped_at_1_1_does_not_ask_for_the_aggregate_mirror() -> None:
    conf = make_conf(upgrade_levels__conductor="1.1")
    transports = rpc.Transports(conf)
    client = rpcapi.ConductorAPI(conf, transports.get("fake:///"))
    with pytest.raises(exception.RPCVersionCapped, match="sync_host_aggregates needs 1.2"):
        client.sync_host_aggregates(CTXT, "h1")
    transports.cleanup()


class BootConductor:
    target = messaging.Target(version="1.3")

    def __init__(self) -> None:
        self.casts: list[tuple[str, dict[str, Any]]] = []
        self.got = threading.Event()

    def _record(self, method: str, **kwargs: Any) -> None:
        self.casts.append((method, kwargs))
        if len(self.casts) == 3:
            self.got.set()

    def build_instances(self, ctxt: Any, **kwargs: Any) -> None:
        self._record("build_instances", **kwargs)

    def rebuild_instance(self, ctxt: Any, **kwargs: Any) -> None:
        self._record("rebuild_instance", **kwargs)

    def delete_instance(self, ctxt: Any, **kwargs: Any) -> None:
        self._record("delete_instance", **kwargs)


def test_boot_path_casts_are_1_3() -> None:
    conf = make_conf()
    transports = rpc.Transports(conf)
    transport = transports.get("fake:///")
    endpoint = BootConductor()
    server = rpc.get_server(transport, rpcapi.TOPIC, "conductor-1", [endpoint])
    server.start()
    try:
        client = rpcapi.ConductorAPI(conf, transport)
        client.build_instances(CTXT, ["u1", "u2"], min_count=2)
        client.rebuild_instance(CTXT, "u1")
        client.delete_instance(CTXT, "u2")
        assert endpoint.got.wait(5)
    finally:
        server.stop()
        server.wait()
        transports.cleanup()
    assert sorted(endpoint.casts, key=lambda c: c[0]) == [
        ("build_instances", {"instance_uuids": ["u1", "u2"], "min_count": 2}),
        ("delete_instance", {"instance_uuid": "u2"}),
        ("rebuild_instance", {"instance_uuid": "u1"}),
    ]


def test_client_capped_at_1_2_does_not_build() -> None:
    conf = make_conf(upgrade_levels__conductor="1.2")
    transports = rpc.Transports(conf)
    client = rpcapi.ConductorAPI(conf, transports.get("fake:///"))
    with pytest.raises(exception.RPCVersionCapped, match="build_instances needs 1.3"):
        client.build_instances(CTXT, ["u1"])
    transports.cleanup()


class PinsConductor(Conductor):
    target = messaging.Target(version="1.5")


@pytest.mark.parametrize(("cap", "version", "pins"), [(None, "1.5", True),
                                                      ("1.4", "1.1", False)])
def test_report_with_a_pin_is_1_5_or_sent_without_pins_below(monkeypatch, cap, version, pins):
    conf = make_conf(upgrade_levels__conductor=cap) if cap else make_conf()
    transports = rpc.Transports(conf)
    transport = transports.get("fake:///")
    endpoint = PinsConductor()
    server = rpc.get_server(transport, rpcapi.TOPIC, "conductor-1", [endpoint])
    asked: list[str] = []
    real_prepare = rpc.prepare

    def prepare(client: Any, method: str, v: str, **kwargs: Any) -> Any:
        asked.append(v)
        return real_prepare(client, method, v, **kwargs)

    monkeypatch.setattr(rpc, "prepare", prepare)
    server.start()
    try:
        images = [{"image_id": "a", "size": 1, "last_used": 5.0, "pinned_until": 9.0},
                  {"image_id": "b", "size": 2, "last_used": 6.0}]
        rpcapi.ConductorAPI(conf, transport).report_image_cache(
            CTXT, "h1", images, 3)  # type: ignore[arg-type]
        assert endpoint.got.wait(5)
    finally:
        server.stop()
        server.wait()
        transports.cleanup()
    assert asked == [version]
    [report] = endpoint.reports
    assert report["images"][0] == ({"image_id": "a", "size": 1, "last_used": 5.0,
                                    "pinned_until": 9.0} if pins else
                                   {"image_id": "a", "size": 1, "last_used": 5.0})
    assert report["images"][1] == images[1]


class RegisteringConductor:
    target = messaging.Target(version="1.6")

    def __init__(self) -> None:
        self.registrations: list[dict[str, Any]] = []

    def register_service(self, ctxt: Any, **kwargs: Any) -> dict[str, Any]:
        self.registrations.append(kwargs)
        return {"host": kwargs["host"]}


@pytest.mark.parametrize(("cap", "sent"), [(None, {"host_ip": "192.0.2.7"}), ("1.5", {})])
def test_register_sends_the_address_at_1_6_and_without_it_below(cap, sent):
    conf = make_conf(upgrade_levels__conductor=cap) if cap else make_conf()
    transports = rpc.Transports(conf)
    transport = transports.get("fake:///")
    endpoint = RegisteringConductor()
    server = rpc.get_server(transport, rpcapi.TOPIC, "conductor-1", [endpoint])
    server.start()
    try:
        rpcapi.ConductorAPI(conf, transport).register_service(
            CTXT, "c1", "fleetcache-compute", "compute", {}, host_ip="192.0.2.7")
    finally:
        server.stop()
        server.wait()
        transports.cleanup()
    assert endpoint.registrations == [{"host": "c1", "binary": "fleetcache-compute",
                                       "topic": "compute", "capabilities": {}, **sent}]


class CachingConductor:
    target = messaging.Target(version="1.7")

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def cache_images(self, ctxt: Any, **kwargs: Any) -> dict[str, Any]:
        self.requests.append(kwargs)
        return {"uuid": "j1"}


TERMS = {"window": {"start": "01:00", "end": "05:00", "timezone": "UTC"}, "priority": 80}


@pytest.mark.parametrize(("pin", "terms", "version"), [
    (None, None, "1.0"), (60, None, "1.4"), (None, {}, "1.0"), (None, TERMS, "1.7"),
    (60, TERMS, "1.7"),
])
def test_cache_images_asks_the_lowest_version_its_arguments_need(
        monkeypatch: pytest.MonkeyPatch, pin: int | None, terms: dict[str, Any] | None,
        version: str) -> None:
    conf = make_conf()
    transports = rpc.Transports(conf)
    transport = transports.get("fake:///")
    endpoint = CachingConductor()
    server = rpc.get_server(transport, rpcapi.TOPIC, "conductor-1", [endpoint])
    asked: list[str] = []
    real_prepare = rpc.prepare

    def prepare(client: Any, method: str, v: str, **kwargs: Any) -> Any:
        asked.append(v)
        return real_prepare(client, method, v, **kwargs)

    monkeypatch.setattr(rpc, "prepare", prepare)
    server.start()
    try:
        rpcapi.ConductorAPI(conf, transport).cache_images(
            CTXT, 1, ["a"], pin_seconds=pin, terms=terms)
    finally:
        server.stop()
        server.wait()
        transports.cleanup()
    assert asked == [version]
    [request] = endpoint.requests
    expected: dict[str, Any] = {"aggregate_id": 1, "image_ids": ["a"]}
    if pin is not None:
        expected["pin_seconds"] = pin
    if terms:
        expected["terms"] = terms
    assert request == expected


def test_terms_are_refused_by_a_client_capped_below_1_7() -> None:
    conf = make_conf(upgrade_levels__conductor="1.6")
    transports = rpc.Transports(conf)
    client = rpcapi.ConductorAPI(conf, transports.get("fake:///"))
    with pytest.raises(exception.RPCVersionCapped, match="cache_images needs 1.7"):
        client.cache_images(CTXT, 1, ["a"], terms=TERMS)
    transports.cleanup()
