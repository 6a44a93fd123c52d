"""Tests of ``fleetcache-compute`` start-up and its reporter."""

from __future__ import annotations

import logging
import os
import pathlib
from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.cmd import compute as compute_cmd
from fleetcache.cmd.common import EXIT_CONFIG
from fleetcache.common import config, exception, rpc
from fleetcache.common.context import RequestContext
from fleetcache.compute.virt.fake import FakeDriver


def _conf_file(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    path = tmp_path / "compute.conf"
    path.write_text(f"[DEFAULT]\nhost = c1\nstate_path = {tmp_path}\n{text}")
    return path


def _load(path: pathlib.Path) -> cfg.ConfigOpts:
    """Options from ``path`` without parse_config's logging set-up (which would take over the
    root logger from pytest's caplog)."""
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    rpc.register_opts(conf)
    conf(["--config-file", str(path)], project="fleetcache", default_config_files=[])
    return conf


def _main(tmp_path: pathlib.Path, text: str) -> int:
    path = _conf_file(tmp_path, text)
    try:
        return compute_cmd.main(["--config-file", str(path)], cfg.ConfigOpts())
    except SystemExit as exc:
        return int(exc.code or 0)


def test_unknown_driver_exits_2_listing_known_drivers(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main(tmp_path, "compute_driver = nosuch\n") == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "compute_driver" in err and "'fake'" in err and "Traceback" not in err


def test_unusable_transport_url_exits_2_naming_the_option(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main(tmp_path, "compute_driver = fake\ntransport_url = nosuch://h/\n") == EXIT_CONFIG
    assert "[DEFAULT] transport_url" in capsys.readouterr().err


def test_database_settings_on_a_compute_are_warned_about(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _conf_file(tmp_path, "[database]\nconnection = mysql+pymysql://root:pw@db/x\n")
    conf = _load(path)
    with caplog.at_level(logging.WARNING):
        compute_cmd._warn_database_settings(conf)
    assert "holds no database credentials" in caplog.text
    caplog.clear()
    conf = _load(_conf_file(tmp_path, ""))
    with caplog.at_level(logging.WARNING):
        compute_cmd._warn_database_settings(conf)
    assert caplog.text == ""


class StubConductor:
    """Stands in for ConductorAPI; forgets the service on request."""

    def __init__(self) -> None:
        self.registered: list[dict[str, Any]] = []
        self.heartbeats = 0
        self.forget = False

    def register_service(self, ctxt: RequestContext, host: str, binary: str, topic: str,
                         capabilities: dict[str, Any],
                         host_ip: str | None = None) -> dict[str, Any]:
        self.registered.append(dict(host=host, binary=binary, topic=topic, caps=capabilities,
                                    host_ip=host_ip))
        return {"host": host, "cell": {"name": "cell1"}}

    def service_heartbeat(self, ctxt: RequestContext, host: str, binary: str,
                          capabilities: dict[str, Any] | None = None) -> None:
        if self.forget:
            self.forget = False
            raise exception.ComputeHostNotFound(host=host)
        self.heartbeats += 1


def test_reporter_registers_capabilities_heartbeats_and_reregisters(tmp_path: pathlib.Path) -> None:
    conf = _load(_conf_file(tmp_path, "report_interval = 7\ninstances_path = $state_path\n"
                                      "my_ip = 192.0.2.7\n"
                                      "[compute]\ncustom_traits = CUSTOM_B,CUSTOM_A\n"))
    conductor = StubConductor()
    reporter = compute_cmd.make_reporter(conf, conductor, FakeDriver(conf))  # type: ignore[arg-type]
    assert reporter.run_once() == 7
    [registered] = conductor.registered
    caps = registered.pop("caps")
    assert registered == dict(host="c1", binary="fleetcache-compute", topic="compute",
                              host_ip="192.0.2.7")
    inventory = caps.pop("inventory")
    assert caps == {**FakeDriver.capabilities, "custom_traits": ["CUSTOM_A", "CUSTOM_B"]}
    assert inventory["VCPU"]["total"] == os.cpu_count()
    assert inventory["MEMORY_MB"]["reserved"] == 512
    reporter.run_once()
    assert conductor.heartbeats == 1
    conductor.forget = True
    reporter.run_once()
    assert len(conductor.registered) == 2


class ReportingConductor:
    """The conductor client's ``report_image_cache``; ``capped`` refuses it, as
    ``[upgrade_levels] conductor = 1.0`` makes the real client do."""

    def __init__(self, capped: bool = False) -> None:
        self.capped = capped
        self.reports: list[tuple[str, list[Any], int]] = []

    def report_image_cache(self, ctxt: RequestContext, host: str, images: list[Any],
                           usage_bytes: int) -> None:
        if self.capped:
            raise exception.RPCVersionCapped(topic="conductor", cap="1.0",
                                             method="report_image_cache", version="1.1")
        self.reports.append((host, images, usage_bytes))


def test_cache_report_casts_to_the_conductor_as_this_host(tmp_path: pathlib.Path) -> None:
    conf = _load(_conf_file(tmp_path, ""))
    conductor = ReportingConductor()
    report = compute_cmd.make_cache_report(conf, conductor)  # type: ignore[arg-type]
    image = {"image_id": "img", "size": 1, "last_used": 2.0}
    report([image], 4096)  # type: ignore[list-item]
    assert conductor.reports == [("c1", [image], 4096)]


def test_a_capped_conductor_is_warned_about_once_then_not_reported_to(
        tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture) -> None:
    conf = _load(_conf_file(tmp_path, ""))
    conductor = ReportingConductor(capped=True)
    report = compute_cmd.make_cache_report(conf, conductor)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        report([], 0)
        conductor.capped = False  # reports stay off until the compute restarts
        report([], 0)
    assert sum("Not reporting the image cache" in r.message for r in caplog.records) == 1
    assert conductor.reports == []


def test_a_single_rpc_worker_exits_2_naming_the_option(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main(tmp_path, "compute_driver = fake\nexecutor_thread_pool_size = 1\n") == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "executor_thread_pool_size (1) must be at least 2" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_the_old_pool_of_8_keeps_starting_with_7_long_calls_and_a_warning(
    tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = _load(_conf_file(tmp_path, "compute_driver = fake\ntransport_url = fake:///\n"
                                         "executor_thread_pool_size = 8\n"))
    transports = rpc.Transports(conf)
    try:
        with caplog.at_level(logging.WARNING):
            service = compute_cmd.build_service(conf, transports)
        manager = service.servers["compute"].dispatcher.endpoints[0]
        assert manager.long_calls.limit == 7
        assert "max_concurrent_long_calls (24) is not below" in caplog.text
    finally:
        transports.cleanup()


def test_peer_tls_set_in_part_exits_2_naming_the_options(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = ("compute_driver = fake\n[image_cache]\n"
            f"peer_ssl_cert_file = {tmp_path}/c.pem\npeer_ssl_ca_file = {tmp_path}/ca.pem\n")
    assert _main(tmp_path, text) == EXIT_CONFIG
    [line] = capsys.readouterr().err.strip().splitlines()
    assert ("[image_cache] peer_ssl_cert_file, peer_ssl_ca_file set without "
            "peer_ssl_key_file") in line
    assert "Traceback" not in line
