"""Service records: registration, heartbeats, lookups, on every backend."""

from __future__ import annotations

import pytest

from fleetcache.common import exception
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from fleetcache.common.servicegroup import service_is_up

pytestmark = pytest.mark.db
COMPUTE = "fleetcache-compute"


def test_register_creates_an_up_service(db: Database) -> None:
    svc = db_services.service_register(db, "c1", COMPUTE, "compute", None, {"has_imagecache": True})
    assert svc["host"] == "c1" and svc["binary"] == COMPUTE and svc["topic"] == "compute"
    assert svc["cell"] is None and not svc["disabled"] and not svc["forced_down"]
    assert svc["capabilities"] == {"has_imagecache": True}
    assert svc["report_count"] == 1
    assert service_is_up(svc, 60)


def test_register_again_refreshes_the_same_record(db: Database) -> None:
    cell = db_cells.cell_create(db, "cell1", "rabbit://h/1")
    first = db_services.service_register(db, "c1", COMPUTE, "compute", None, {"a": 1})
    again = db_services.service_register(db, "c1", COMPUTE, "compute", cell["id"], {"a": 2})
    assert again["id"] == first["id"] and again["uuid"] == first["uuid"]
    assert again["report_count"] == 2
    assert again["cell"] == cell
    assert again["capabilities"] == {"a": 2}
    assert len(db_services.service_list(db)) == 1


def test_same_host_different_binaries_are_different_services(db: Database) -> None:
    db_services.service_register(db, "h", COMPUTE, "compute", None)
    db_services.service_register(db, "h", "fleetcache-conductor", "conductor", None)
    assert len(db_services.service_list(db)) == 2
    assert [s["binary"] for s in db_services.service_list(db, binary=COMPUTE)] == [COMPUTE]


def test_heartbeat_counts_and_keeps_capabilities_unless_given(db: Database) -> None:
    first = db_services.service_register(db, "c1", COMPUTE, "compute", None, {"a": 1})
    beat = db_services.service_heartbeat(db, "c1", COMPUTE)
    assert beat["report_count"] == 2
    assert beat["last_seen_up"] is not None and first["last_seen_up"] is not None
    assert beat["last_seen_up"] >= first["last_seen_up"]
    assert beat["capabilities"] == {"a": 1}
    assert db_services.service_heartbeat(db, "c1", COMPUTE, {"b": 2})["capabilities"] == {"b": 2}


def test_heartbeat_of_an_unknown_service(db: Database) -> None:
    with pytest.raises(exception.ComputeHostNotFound):
        db_services.service_heartbeat(db, "ghost", COMPUTE)


def test_list_by_hosts_in_one_query(db: Database) -> None:
    for host in ("c1", "c2", "c3"):
        db_services.service_register(db, host, COMPUTE, "compute", None)
    listed = db_services.service_list(db, binary=COMPUTE, hosts=["c3", "c1", "x"])
    hosts = [s["host"] for s in listed]
    assert sorted(hosts) == ["c1", "c3"]


def test_disable_enable_force_down(db: Database) -> None:
    svc = db_services.service_register(db, "c1", COMPUTE, "compute", None)
    disabled = db_services.service_update(db, svc["id"], disabled=True, disabled_reason="maint")
    assert disabled["disabled"] and disabled["disabled_reason"] == "maint"
    assert service_is_up(disabled, 60)  # disabled is not down
    down = db_services.service_update(db, svc["id"], forced_down=True)
    assert not service_is_up(down, 60)
    with pytest.raises(exception.InvalidInput):
        db_services.service_update(db, svc["id"], host="other")
    with pytest.raises(exception.NotFound):
        db_services.service_update(db, svc["id"] + 1000, disabled=True)
