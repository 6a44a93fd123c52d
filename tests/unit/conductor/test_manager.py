"""Tests of fleetcache.conductor.manager: registration and heartbeats, mapped to cells."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator

import oslo_messaging as messaging
import pytest
from oslo_config import cfg

from fleetcache.common import exception, rpc
from fleetcache.common.context import get_admin_context
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from fleetcache.conductor import rpcapi
from fleetcache.conductor.manager import ConductorManager, ConductorState

CTXT = get_admin_context()


@contextlib.contextmanager
def raises_expected(exc_type: type[Exception]) -> Iterator[None]:
    """The endpoint declares the error expected: oslo.messaging's decorator wraps it in
    ``ExpectedException`` (unwrapped by the RPC dispatcher, which then logs no traceback)."""
    with pytest.raises(messaging.ExpectedException) as caught:
        yield
    assert isinstance(caught.value.exc_info[1], exc_type)


@pytest.fixture
def state(conf: cfg.ConfigOpts, db: Database) -> Iterator[ConductorState]:
    """What ``fleetcache-conductor`` builds at start-up (pools included), stopped after."""
    transports = rpc.Transports(conf)
    built = ConductorState(conf, db, transports)
    yield built
    built.shutdown(wait=True)
    transports.cleanup()


def test_rpc_versions_in_sync() -> None:
    assert ConductorManager.target.version == rpcapi.RPC_API_VERSION
    assert ConductorManager.RPC_API_VERSION == rpcapi.RPC_API_VERSION


def test_every_client_method_has_a_server_method() -> None:
    client = {n for n, _ in inspect.getmembers(rpcapi.ConductorAPI, inspect.isfunction)
              if not n.startswith("_")}
    server = {n for n, _ in inspect.getmembers(ConductorManager, inspect.isfunction)}
    assert client - server == set()


def test_register_through_the_default_transport_maps_to_no_cell(
    state: ConductorState, db: Database
) -> None:
    manager = ConductorManager(state)
    service = manager.register_service(CTXT, "c1", "fleetcache-compute", "compute",
                                       {"has_imagecache": True})
    assert service["cell"] is None
    assert service["capabilities"] == {"has_imagecache": True}
    assert service["last_seen_up"] is not None


def test_register_records_the_reported_address_and_refuses_a_malformed_one(
    state: ConductorState, db: Database
) -> None:
    manager = ConductorManager(state)
    service = manager.register_service(CTXT, "c1", "fleetcache-compute", "compute", {},
                                       host_ip="2001:db8::7")
    assert service["host_ip"] == "2001:db8::7"
    again = manager.register_service(CTXT, "c1", "fleetcache-compute", "compute", {},
                                     host_ip="not-an-address")
    assert again["host_ip"] is None
    # A compute before 1.6 sends none: the record has none.
    assert manager.register_service(CTXT, "c2", "fleetcache-compute", "compute",
                                    {})["host_ip"] is None


def test_register_through_a_cell_transport_maps_to_that_cell(
    state: ConductorState, db: Database
) -> None:
    cell1 = db_cells.cell_create(db, "cell1", "rabbit://guest:guest@127.0.0.1:5672/c1")
    cell2 = db_cells.cell_create(db, "cell2", "rabbit://guest:guest@127.0.0.1:5672/c2")
    by_cell = {c["name"]: ConductorManager(state, cell=c) for c in (cell1, cell2)}
    by_cell["cell1"].register_service(CTXT, "c1", "fleetcache-compute", "compute", {})
    by_cell["cell2"].register_service(CTXT, "c2", "fleetcache-compute", "compute", {})
    cells = {s["host"]: s["cell"]["name"] for s in db_services.service_list(db) if s["cell"]}
    assert cells == {"c1": "cell1", "c2": "cell2"}


def test_registering_again_moves_a_service_to_the_new_cell(
    state: ConductorState, db: Database
) -> None:
    cell1 = db_cells.cell_create(db, "cell1", "rabbit://h/c1")
    ConductorManager(state).register_service(CTXT, "c1", "fleetcache-compute", "compute", {})
    ConductorManager(state, cell=cell1).register_service(
        CTXT, "c1", "fleetcache-compute", "compute", {})
    [service] = db_services.service_list(db)
    assert service["cell"] is not None and service["cell"]["name"] == "cell1"


def test_register_refuses_an_empty_host(state: ConductorState, db: Database) -> None:
    with raises_expected(exception.InvalidInput):
        ConductorManager(state).register_service(CTXT, "", "fleetcache-compute", "compute", {})


def test_heartbeat_updates_last_seen_and_capabilities(state: ConductorState, db: Database) -> None:
    manager = ConductorManager(state)
    first = manager.register_service(CTXT, "c1", "fleetcache-compute", "compute", {"a": 1})
    manager.service_heartbeat(CTXT, "c1", "fleetcache-compute")
    after = db_services.service_get(db, "c1", "fleetcache-compute")
    assert after["report_count"] == first["report_count"] + 1
    assert after["last_seen_up"] is not None and first["last_seen_up"] is not None
    assert after["last_seen_up"] >= first["last_seen_up"]
    assert after["capabilities"] == {"a": 1}  # None keeps them
    manager.service_heartbeat(CTXT, "c1", "fleetcache-compute", capabilities={"a": 2})
    assert db_services.service_get(db, "c1", "fleetcache-compute")["capabilities"] == {"a": 2}


def test_heartbeat_of_an_unknown_service_says_so(state: ConductorState, db: Database) -> None:
    with raises_expected(exception.ComputeHostNotFound):
        ConductorManager(state).service_heartbeat(CTXT, "ghost", "fleetcache-compute")


def test_endpoints_of_one_process_share_its_state(state: ConductorState) -> None:
    a = ConductorManager(state)
    b = ConductorManager(state, cell=None)
    assert a.state is b.state
    assert (a.conf, a.db) == (state.conf, state.db)
