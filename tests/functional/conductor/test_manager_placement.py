"""The conductor's endpoint keeps computes' providers in a real Placement (in-process): a
registration writes the provider and marks the compute schedulable; with Placement
unreachable the compute stays unschedulable until a heartbeat gets through; the API's
``sync_host_aggregates`` cast mirrors aggregate membership."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
from oslo_config import cfg

from fleetcache.common import binaries, rpc
from fleetcache.common.context import get_admin_context
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import migration
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from fleetcache.conductor.manager import ConductorManager, ConductorState
from fleetcache.conductor.placement import PlacementClient, ProviderSync, provider_uuid
from tests.functional.conductor.test_placement_provider import capabilities
from tests.functional.conftest import unique_host, unreachable

CTXT = get_admin_context()
COMPUTE = binaries.COMPUTE


@pytest.fixture
def db(tmp_path: pathlib.Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path}/conductor.sqlite")
    migration.db_sync(database)
    yield database
    database.dispose()


@pytest.fixture
def manager(placement_conf: cfg.ConfigOpts, db: Database) -> Iterator[ConductorManager]:
    rpc.register_opts(placement_conf)
    placement_conf.set_override("transport_url", "fake:///")
    transports = rpc.Transports(placement_conf)
    state = ConductorState(placement_conf, db, transports)
    yield ConductorManager(state)
    state.shutdown(wait=True)
    transports.cleanup()


def test_registration_writes_the_provider_and_makes_the_compute_schedulable(
    manager: ConductorManager, db: Database, placement_client: PlacementClient,
) -> None:
    host = unique_host("compute")
    agg = db_aggregates.aggregate_create(db, f"agg-{host}")
    db_services.service_register(db, host, COMPUTE, "compute", None)  # known before the aggregate
    db_aggregates.aggregate_add_host(db, agg["id"], host)

    manager.register_service(CTXT, host, COMPUTE, "compute",
                             capabilities(supports_image_type_qcow2=False))

    rp = provider_uuid(host)
    assert placement_client.get_traits(rp)[1] == {"COMPUTE_IMAGE_TYPE_RAW", "CUSTOM_TROVE"}
    assert placement_client.get_aggregates(rp)[1] == {agg["uuid"]}
    assert db_services.service_get(db, host, COMPUTE)["placement_synced_at"] is not None


def test_a_compute_stays_unschedulable_until_placement_answers(
    manager: ConductorManager, db: Database, placement_client: PlacementClient,
) -> None:
    host = unique_host("compute")
    working = manager.state.providers
    assert working is not None
    manager.state.providers = ProviderSync(unreachable(placement_client), 1)

    manager.register_service(CTXT, host, COMPUTE, "compute", capabilities())
    assert db_services.service_get(db, host, COMPUTE)["placement_synced_at"] is None
    manager.service_heartbeat(CTXT, host, COMPUTE)
    assert db_services.service_get(db, host, COMPUTE)["placement_synced_at"] is None

    manager.state.providers = working
    manager.service_heartbeat(CTXT, host, COMPUTE)
    assert db_services.service_get(db, host, COMPUTE)["placement_synced_at"] is not None
    assert placement_client.get_provider(provider_uuid(host)) is not None


def test_a_new_registration_is_unschedulable_until_written_again(
    manager: ConductorManager, db: Database,
) -> None:
    host = unique_host("compute")
    manager.register_service(CTXT, host, COMPUTE, "compute", capabilities())
    assert db_services.service_get(db, host, COMPUTE)["placement_synced_at"] is not None
    db_services.service_register(db, host, COMPUTE, "compute", None, capabilities(custom_traits=[]))
    assert db_services.service_get(db, host, COMPUTE)["placement_synced_at"] is None
    # a late success for the older capabilities does not count for the new ones
    assert not db_services.service_placement_synced(db, host, COMPUTE, capabilities())


def test_sync_host_aggregates_mirrors_adds_and_removes(
    manager: ConductorManager, db: Database, placement_client: PlacementClient,
) -> None:
    host = unique_host("compute")
    manager.register_service(CTXT, host, COMPUTE, "compute", capabilities())
    agg = db_aggregates.aggregate_create(db, f"agg-{host}")
    rp = provider_uuid(host)

    db_aggregates.aggregate_add_host(db, agg["id"], host)
    manager.sync_host_aggregates(CTXT, host)
    assert placement_client.get_aggregates(rp)[1] == {agg["uuid"]}

    db_aggregates.aggregate_remove_host(db, agg["id"], host)
    manager.sync_host_aggregates(CTXT, host)
    assert placement_client.get_aggregates(rp)[1] == set()


def test_other_services_get_no_provider(
    manager: ConductorManager, placement_client: PlacementClient,
) -> None:
    host = unique_host("ctl")
    manager.register_service(CTXT, host, "fleetcache-conductor", "conductor", {})
    assert placement_client.get_provider(provider_uuid(host)) is None
