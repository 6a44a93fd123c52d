"""The conductor and compute daemons in one process on ``fake://`` and SQLite.

A compute registers through the conductor, heartbeats, shows up as up, and goes down after
``service_down_time`` once it stops heartbeating; the daemons are assembled exactly as
``fleetcache-conductor`` and ``fleetcache-compute`` assemble them.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator

import pytest
from oslo_config import cfg
from sqlalchemy import delete

from fleetcache.cmd import compute as compute_cmd
from fleetcache.cmd import conductor as conductor_cmd
from fleetcache.common import config, rpc, servicegroup
from fleetcache.common.context import get_admin_context
from fleetcache.common.db import migration, models
from fleetcache.common.db import services as db_services
from fleetcache.common.db.services import ServiceDict
from fleetcache.common.db.session import Database
from fleetcache.common.service import Service
from fleetcache.compute.rpcapi import ComputeAPI
from fleetcache.conductor.manager import ConductorState
from tests.waiting import seconds_until, wait_for

REPORT_INTERVAL = 1
SERVICE_DOWN_TIME = 3
COMPUTE = "fleetcache-compute"


def make_conf(tmp_path: pathlib.Path, host: str, **overrides: object) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    rpc.register_opts(conf)
    conf([], project="fleetcache", default_config_files=[])
    values = {
        "host": host,
        "transport_url": "fake:///",
        "report_interval": REPORT_INTERVAL,
        "service_down_time": SERVICE_DOWN_TIME,
        "rpc_response_timeout": 2,
        "state_path": str(tmp_path),
        "compute_driver": "fake",
        **overrides,
    }
    for name, value in values.items():
        conf.set_override(name, value)
    conf.set_override("connection", f"sqlite:///{tmp_path}/services.sqlite", group="database")
    return conf


class Cloud:
    """A database, a conductor, and computes started on demand; everything stopped at the end."""

    def __init__(self, tmp_path: pathlib.Path) -> None:
        self.tmp_path = tmp_path
        self.conf = make_conf(tmp_path, "conductor-1")
        self.db = Database.from_conf(self.conf)
        migration.db_sync(self.db)
        self.services: list[Service] = []
        self.transports = rpc.Transports(self.conf)
        self.opened = [self.transports]
        self.states: list[ConductorState] = []

    def start_conductor(self) -> Service:
        service, state = conductor_cmd.build_service(self.conf, self.db, self.transports)
        self.states.append(state)
        return self._start(service)

    def start_compute(self, host: str) -> Service:
        conf = make_conf(self.tmp_path, host)
        transports = rpc.Transports(conf)
        self.opened.append(transports)
        return self._start(compute_cmd.build_service(conf, transports))

    def _start(self, service: Service) -> Service:
        service.start()
        self.services.append(service)
        return service

    def service(self, host: str, binary: str = COMPUTE) -> ServiceDict | None:
        found = [s for s in db_services.service_list(self.db, binary=binary) if s["host"] == host]
        return found[0] if found else None

    def is_up(self, host: str, binary: str = COMPUTE) -> bool:
        svc = self.service(host, binary)
        return svc is not None and servicegroup.service_is_up(svc, SERVICE_DOWN_TIME)

    def close(self) -> None:
        for service in reversed(self.services):
            service.stop()
        for state in self.states:
            state.shutdown()
        for transports in self.opened:
            transports.cleanup()
        self.db.dispose()


@pytest.fixture
def cloud(tmp_path: pathlib.Path) -> Iterator[Cloud]:
    cloud = Cloud(tmp_path)
    yield cloud
    cloud.close()


def test_compute_registers_through_the_conductor_and_heartbeats(cloud: Cloud) -> None:
    cloud.start_conductor()
    cloud.start_compute("compute-1")
    wait_for(lambda: cloud.is_up("compute-1"), "compute-1 registered and up", 10)
    svc = cloud.service("compute-1")
    assert svc is not None
    assert svc["cell"] is None  # the default transport is no cell's
    assert svc["topic"] == "compute"
    assert svc["capabilities"]["has_imagecache"] is True  # the fake driver's
    count = svc["report_count"]
    wait_for(lambda: (cloud.service("compute-1") or svc)["report_count"] >= count + 2,
             "two more heartbeats", 5)


def test_conductor_registers_itself_and_heartbeats_to_the_database(cloud: Cloud) -> None:
    cloud.start_conductor()
    wait_for(lambda: cloud.is_up("conductor-1", "fleetcache-conductor"), "conductor up", 5)
    svc = cloud.service("conductor-1", "fleetcache-conductor")
    assert svc is not None and svc["topic"] == "conductor"
    count = svc["report_count"]
    wait_for(lambda: (cloud.service("conductor-1", "fleetcache-conductor") or svc)[
        "report_count"] > count, "a conductor heartbeat", 5)


def test_compute_that_stops_heartbeating_is_down_after_service_down_time(cloud: Cloud) -> None:
    cloud.start_conductor()
    compute = cloud.start_compute("compute-1")
    wait_for(lambda: cloud.is_up("compute-1"), "compute-1 up", 10)
    compute.stop()
    took = seconds_until(lambda: not cloud.is_up("compute-1"), "compute-1 down",
                    SERVICE_DOWN_TIME + 3)
    assert took >= SERVICE_DOWN_TIME - REPORT_INTERVAL - 0.5  # not before its time


def test_compute_started_before_the_conductor_registers_once_it_answers(cloud: Cloud) -> None:
    cloud.start_compute("compute-1")
    time.sleep(1)
    assert cloud.service("compute-1") is None
    cloud.start_conductor()
    wait_for(lambda: cloud.is_up("compute-1"), "compute-1 registered after retrying", 15)


def test_compute_registers_again_when_its_record_is_deleted(cloud: Cloud) -> None:
    cloud.start_conductor()
    cloud.start_compute("compute-1")
    wait_for(lambda: cloud.service("compute-1") is not None, "compute-1 registered", 10)
    svc = cloud.service("compute-1")
    assert svc is not None
    with cloud.db.transaction() as session:  # no fleetcache command deletes a service; SQL can
        session.execute(delete(models.Service).where(models.Service.id == svc["id"]))
    wait_for(lambda: cloud.service("compute-1") is not None, "compute-1 registered again", 5)
    again = cloud.service("compute-1")
    assert again is not None and again["uuid"] != svc["uuid"]


def test_compute_serves_rpc_on_its_host_name(cloud: Cloud) -> None:
    cloud.start_conductor()
    cloud.start_compute("compute-1")
    cloud.start_compute("compute-2")
    wait_for(lambda: cloud.is_up("compute-1") and cloud.is_up("compute-2"), "computes up", 10)
    api = ComputeAPI(cloud.conf, cloud.transports.get())
    ctxt = get_admin_context()
    first = api.cache_images(ctxt, "compute-1", ["img-a"])
    assert first["img-a"]["state"] == "cached"
    assert api.cache_images(ctxt, "compute-1", ["img-a"])["img-a"]["state"] == "existing"
    assert api.cache_images(ctxt, "compute-2", ["img-a"])["img-a"]["state"] == "cached"
