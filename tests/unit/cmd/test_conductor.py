"""Tests of ``fleetcache-conductor`` assembly."""

from __future__ import annotations

import datetime

import pytest
from oslo_config import cfg

from fleetcache.cmd import conductor as conductor_cmd
from fleetcache.common import rpc
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import jobs, models
from fleetcache.common.db.session import Database


@pytest.fixture
def conf(conf: cfg.ConfigOpts) -> cfg.ConfigOpts:
    """The shared configuration (tests/unit/conftest.py), on host ``cond-1``."""
    conf.set_override("host", "cond-1")
    return conf


def test_first_takeover_pass_claims_the_jobs_a_previous_conductor_here_left(
    conf: cfg.ConfigOpts, db: Database, transports: rpc.Transports
) -> None:
    """Its own host's previous process is gone: its jobs are taken at once, whatever their
    lease; another host's jobs under a live lease are left alone."""
    later = models.utcnow() + datetime.timedelta(hours=1)
    mine = jobs.job_create(db, 1, "agg-uuid", ["img"], 1, "cond-1", owner="cond-1:old",
                           lease_expires_at=later)
    other = jobs.job_create(db, 1, "agg-uuid", ["img"], 1, "cond-2", owner="cond-2:live",
                            lease_expires_at=later)
    _service, state = conductor_cmd.build_service(conf, db, transports)
    try:
        assert jobs.job_get(db, mine["uuid"])["owner"] == "cond-1:old"  # not before start
        assert state.takeover.claim() == [mine["uuid"]]
        assert jobs.job_get(db, mine["uuid"])["owner"] == state.owner.owner
        assert jobs.job_get(db, other["uuid"])["owner"] == "cond-2:live"
        assert state.takeover.claim() == []  # later passes wait for leases to expire
    finally:
        state.shutdown()


def test_serves_the_default_transport_and_each_cell(
    conf: cfg.ConfigOpts, db: Database, transports: rpc.Transports
) -> None:
    db_cells.cell_create(db, "cell1", "fake:///cell1")
    service, state = conductor_cmd.build_service(conf, db, transports)
    service.start()
    try:
        assert len(service.servers) == 2
    finally:
        service.stop()
        state.shutdown()


def test_pools_are_built_at_start_up_from_the_options(
    conf: cfg.ConfigOpts, db: Database, transports: rpc.Transports
) -> None:
    conf.set_override("precache_concurrency", 5, group="image_cache")
    conf.set_override("max_concurrent_jobs", 2, group="conductor")
    _service, state = conductor_cmd.build_service(conf, db, transports)
    try:
        assert state.host_calls.size == 5
        assert state.precacher.host_calls is state.host_calls
        assert state.job_coordinators._max_workers == 2  # futurist keeps no public copy
    finally:
        state.shutdown()
    assert state.host_calls.stopping.is_set()


def test_main_freezes_the_start_up_heap_once_built_and_before_serving(
    monkeypatch: pytest.MonkeyPatch, conf: cfg.ConfigOpts
) -> None:
    events: list[str] = []

    class FakeService:
        def run(self) -> int:
            events.append("run")
            return 0

    class FakeState:
        def shutdown(self) -> None:
            events.append("shutdown")

    class FakeTransports:
        def __init__(self, conf_: cfg.ConfigOpts) -> None:
            self.conf = conf_

        def get(self) -> None:
            events.append("transport")

        def notification(self) -> None:
            events.append("notification transport")

        def cleanup(self) -> None:
            events.append("transports closed")

    class FakeDb:
        def dispose(self) -> None:
            pass

    def build(*_args: object, **_kwargs: object) -> tuple[FakeService, FakeState]:
        events.append("built")
        return FakeService(), FakeState()

    def freeze() -> int:
        events.append("frozen")
        return 1

    monkeypatch.setattr(conductor_cmd.common, "parse_config", lambda *a, **k: conf)
    monkeypatch.setattr(conductor_cmd.common, "open_database", lambda *a, **k: FakeDb())
    monkeypatch.setattr(conductor_cmd.rpc, "Transports", FakeTransports)
    monkeypatch.setattr(conductor_cmd, "build_service", build)
    monkeypatch.setattr(conductor_cmd.metrics, "start_exporter", lambda *a, **k: None)
    monkeypatch.setattr(conductor_cmd.heap, "freeze_startup_heap", freeze)

    assert conductor_cmd.main([], conf) == 0
    assert events == ["transport", "notification transport", "built", "frozen", "run",
                      "shutdown", "transports closed"]
