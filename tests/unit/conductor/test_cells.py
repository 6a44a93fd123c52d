"""Tests of fleetcache.conductor.cells: which transports a conductor serves, and for whom."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from oslo_config import cfg

from fleetcache.common import rpc
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db.cells import CellDict
from fleetcache.common.db.session import Database
from fleetcache.common.service import Service
from fleetcache.compute.rpcapi import ComputeAPI
from fleetcache.conductor.cells import CellListeners, CellTransports, redact_url
from fleetcache.conductor.manager import ConductorManager, ConductorState


@pytest.fixture
def state(conf: cfg.ConfigOpts, db: Database,
          transports: rpc.Transports) -> Iterator[ConductorState]:
    built = ConductorState(conf, db, transports)
    yield built
    built.shutdown(wait=True)


def test_redact_url_hides_the_password_only() -> None:
    assert redact_url("rabbit://guest:s3cr#t@h:5672/v") == "rabbit://guest:***@h:5672/v"
    assert redact_url("rabbit://a:1@h1,b:2@h2/v") == "rabbit://a:***@h1,b:***@h2/v"
    assert redact_url("fake:///") == "fake:///"
    assert redact_url(None) == "[DEFAULT] transport_url"


def test_routes_default_transport_is_no_cell_and_cells_are_their_own(
    conf: cfg.ConfigOpts, db: Database, transports: rpc.Transports
) -> None:
    c1 = db_cells.cell_create(db, "cell1", "fake:///cell1")
    routes = CellTransports(conf, db, transports).routes()
    assert routes == {"fake:///": None, "fake:///cell1": c1}


def test_routes_default_transport_that_is_a_cells_maps_to_it(
    conf: cfg.ConfigOpts, db: Database, transports: rpc.Transports
) -> None:
    c1 = db_cells.cell_create(db, "cell1", "fake:///")
    assert CellTransports(conf, db, transports).routes() == {"fake:///": c1}


def test_routes_cells_sharing_a_url_map_to_the_first(
    conf: cfg.ConfigOpts, db: Database, transports: rpc.Transports
) -> None:
    c1 = db_cells.cell_create(db, "cell1", "fake:///shared")
    db_cells.cell_create(db, "cell2", "fake:///shared")
    assert CellTransports(conf, db, transports).routes() == {"fake:///": None, "fake:///shared": c1}


def test_compute_api_is_one_client_per_transport(
    conf: cfg.ConfigOpts, db: Database, transports: rpc.Transports
) -> None:
    c1 = db_cells.cell_create(db, "cell1", "fake:///cell1")
    transports = CellTransports(conf, db, transports)
    api = transports.compute_api(c1)
    assert isinstance(api, ComputeAPI)
    assert transports.compute_api(c1) is api
    assert transports.compute_api(None) is not api


def _listeners(state: ConductorState, service: Service) -> CellListeners:
    def make(cell: CellDict | None) -> ConductorManager:
        return ConductorManager(state, cell=cell)

    return CellListeners(state.cells, service, make)


def _served_cells(listeners: CellListeners) -> dict[str | None, str | None]:
    return {
        url: (endpoint.cell["name"] if endpoint.cell else None)
        for url, (_key, endpoint) in listeners._served.items()
    }


def test_listeners_follow_the_cells_table(state: ConductorState, db: Database) -> None:
    service = Service("test", stop_timeout=5)
    listeners = _listeners(state, service)
    listeners.refresh(strict=True)
    service.start()
    try:
        assert _served_cells(listeners) == {"fake:///": None}
        assert len(service.servers) == 1

        db_cells.cell_create(db, "cell1", "fake:///cell1")
        listeners.refresh()
        assert _served_cells(listeners) == {"fake:///": None, "fake:///cell1": "cell1"}
        assert len(service.servers) == 2

        db_cells.cell_update(db, "cell1", name="renamed")
        listeners.refresh()
        assert _served_cells(listeners)["fake:///cell1"] == "renamed"
        assert len(service.servers) == 2

        db_cells.cell_delete(db, "renamed")
        listeners.refresh()
        assert _served_cells(listeners) == {"fake:///": None}
        assert len(service.servers) == 1
    finally:
        service.stop()


def test_listeners_survive_a_bad_cell_url(state: ConductorState, db: Database) -> None:
    service = Service("test", stop_timeout=5)
    listeners = _listeners(state, service)
    db_cells.cell_create(db, "broken", "nosuchdriver://x/")
    listeners.refresh(strict=True)  # only the default transport is fatal
    assert _served_cells(listeners) == {"fake:///": None}


def test_listeners_strict_refresh_raises_when_the_default_fails(
    conf: cfg.ConfigOpts, state: ConductorState
) -> None:
    conf.set_override("transport_url", "nosuchdriver://x/")  # after the state was built
    listeners = _listeners(state, Service("test"))
    with pytest.raises(Exception, match="nosuchdriver"):
        listeners.refresh(strict=True)
