"""Aggregates, their hosts and metadata, on every backend (Nova's semantics)."""

from __future__ import annotations

from typing import Any

import pytest

from fleetcache.common import exception
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import models
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database

pytestmark = pytest.mark.db
COMPUTE = "fleetcache-compute"


@pytest.fixture
def hosts(db: Database) -> list[str]:
    names = ["c1", "c2"]
    for host in names:
        db_services.service_register(db, host, COMPUTE, "compute", None)
    return names


def test_create_with_zone_and_metadata(db: Database) -> None:
    agg = db_aggregates.aggregate_create(db, "agg1", availability_zone="az1",
                                         metadata={"ssd": "true"})
    assert agg["name"] == "agg1" and agg["availability_zone"] == "az1"
    assert agg["metadata"] == {"ssd": "true", "availability_zone": "az1"}
    assert agg["hosts"] == []
    assert db_aggregates.aggregate_get(db, agg["id"]) == agg
    assert db_aggregates.aggregate_get_by_uuid(db, agg["uuid"]) == agg
    assert [a["id"] for a in db_aggregates.aggregate_list(db)] == [agg["id"]]


def test_duplicate_name_conflicts(db: Database) -> None:
    db_aggregates.aggregate_create(db, "agg1")
    with pytest.raises(exception.AggregateNameExists):
        db_aggregates.aggregate_create(db, "agg1")


def test_rename_onto_an_existing_name_conflicts(db: Database) -> None:
    db_aggregates.aggregate_create(db, "agg1")
    other = db_aggregates.aggregate_create(db, "agg2")
    with pytest.raises(exception.AggregateNameExists):
        db_aggregates.aggregate_update(db, other["id"], name="agg1")
    # renaming an aggregate to its own name is no conflict
    assert db_aggregates.aggregate_update(db, other["id"], name="agg2")["name"] == "agg2"
    renamed = db_aggregates.aggregate_update(db, other["id"], name="agg3", availability_zone="az9")
    assert renamed["name"] == "agg3" and renamed["availability_zone"] == "az9"
    assert renamed["updated_at"] is not None


def test_set_metadata_adds_changes_and_null_deletes(db: Database) -> None:
    agg = db_aggregates.aggregate_create(db, "agg1", metadata={"a": "1", "b": "2"})
    agg = db_aggregates.aggregate_set_metadata(db, agg["id"], {"a": "10", "b": None, "c": "3"})
    assert agg["metadata"] == {"a": "10", "c": "3"}
    agg = db_aggregates.aggregate_set_metadata(db, agg["id"], {"missing": None})
    assert agg["metadata"] == {"a": "10", "c": "3"}  # deleting an absent key is a no-op
    agg = db_aggregates.aggregate_set_metadata(db, agg["id"], {"availability_zone": "az2"})
    assert db_aggregates.aggregate_get(db, agg["id"])["availability_zone"] == "az2"


def test_add_and_remove_hosts(db: Database, hosts: list[str]) -> None:
    agg = db_aggregates.aggregate_create(db, "agg1")
    for host in hosts:
        agg = db_aggregates.aggregate_add_host(db, agg["id"], host)
    assert sorted(agg["hosts"]) == hosts
    agg = db_aggregates.aggregate_remove_host(db, agg["id"], "c1")
    assert agg["hosts"] == ["c2"]


def test_get_reads_host_names_in_order_without_host_rows(
        db: Database, rows_built: Any) -> None:
    names = ["c3", "c1", "c2"]
    for host in names:
        db_services.service_register(db, host, COMPUTE, "compute", None)
    agg = db_aggregates.aggregate_create(db, "agg1", metadata={"ssd": "true"})
    for host in names:
        db_aggregates.aggregate_add_host(db, agg["id"], host)
    with rows_built(models.AggregateHost) as built:
        by_id = db_aggregates.aggregate_get(db, agg["id"])
        by_uuid = db_aggregates.aggregate_get_by_uuid(db, agg["uuid"])
    assert built == []
    assert by_id == by_uuid
    assert by_id["hosts"] == names and by_id["metadata"] == {"ssd": "true"}


def test_host_in_two_aggregates(db: Database, hosts: list[str]) -> None:
    a = db_aggregates.aggregate_create(db, "a")
    b = db_aggregates.aggregate_create(db, "b")
    db_aggregates.aggregate_add_host(db, a["id"], "c1")
    assert db_aggregates.aggregate_add_host(db, b["id"], "c1")["hosts"] == ["c1"]


def test_add_host_conflicts_and_unknowns(db: Database, hosts: list[str]) -> None:
    agg = db_aggregates.aggregate_create(db, "agg1")
    db_aggregates.aggregate_add_host(db, agg["id"], "c1")
    with pytest.raises(exception.AggregateHostExists):
        db_aggregates.aggregate_add_host(db, agg["id"], "c1")
    with pytest.raises(exception.ComputeHostNotFound):
        db_aggregates.aggregate_add_host(db, agg["id"], "not-a-compute")
    with pytest.raises(exception.AggregateHostNotFound):
        db_aggregates.aggregate_remove_host(db, agg["id"], "c2")
    with pytest.raises(exception.AggregateNotFound):
        db_aggregates.aggregate_add_host(db, agg["id"] + 1000, "c1")


def test_host_and_metadata_spellings_mean_the_same_on_every_backend(
        db: Database, hosts: list[str]) -> None:
    """A host is added only by its service's exact name, and a new metadata key that differs
    from another only in case is a conflict, whatever the database's collation (MariaDB's
    utf8mb4_general_ci matched "C1" to "c1" and refused "SSD" beside "ssd" with an
    IntegrityError)."""
    agg = db_aggregates.aggregate_create(db, "agg1", metadata={"ssd": "true"})
    with pytest.raises(exception.ComputeHostNotFound):
        db_aggregates.aggregate_add_host(db, agg["id"], "C1")
    assert db_aggregates.aggregate_get(db, agg["id"])["hosts"] == []
    with pytest.raises(exception.AggregateMetadataKeyCase, match="ssd"):
        db_aggregates.aggregate_set_metadata(db, agg["id"], {"SSD": "false"})
    with pytest.raises(exception.AggregateMetadataKeyCase):
        db_aggregates.aggregate_set_metadata(db, agg["id"], {"x": "1", "X": "2"})
    assert db_aggregates.aggregate_get(db, agg["id"])["metadata"] == {"ssd": "true"}
    assert db_aggregates.aggregate_set_metadata(db, agg["id"], {"ssd": "false"})["metadata"] == {
        "ssd": "false"}


def test_delete_refuses_a_non_empty_aggregate(db: Database, hosts: list[str]) -> None:
    agg = db_aggregates.aggregate_create(db, "agg1", metadata={"k": "v"})
    db_aggregates.aggregate_add_host(db, agg["id"], "c1")
    with pytest.raises(exception.AggregateNotEmpty, match="c1"):
        db_aggregates.aggregate_delete(db, agg["id"])
    db_aggregates.aggregate_remove_host(db, agg["id"], "c1")
    db_aggregates.aggregate_delete(db, agg["id"])  # metadata goes with it
    with pytest.raises(exception.AggregateNotFound):
        db_aggregates.aggregate_get(db, agg["id"])
    assert db_aggregates.aggregate_create(db, "agg1")["metadata"] == {}  # the name is free again


def test_not_found(db: Database) -> None:
    with pytest.raises(exception.AggregateNotFound):
        db_aggregates.aggregate_get(db, 424242)
    with pytest.raises(exception.AggregateNotFound):
        db_aggregates.aggregate_get_by_uuid(db, "00000000-0000-0000-0000-000000000000")
    with pytest.raises(exception.AggregateNotFound):
        db_aggregates.aggregate_delete(db, 424242)
    with pytest.raises(exception.AggregateNotFound):
        db_aggregates.aggregate_set_metadata(db, 424242, {"a": "b"})
