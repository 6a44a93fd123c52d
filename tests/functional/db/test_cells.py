"""Cells in the database, on every backend."""

from __future__ import annotations

import pytest

from fleetcache.common import exception
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database

pytestmark = pytest.mark.db


def test_create_and_list(db: Database) -> None:
    c1 = db_cells.cell_create(db, "cell1", "rabbit://guest:guest@127.0.0.1:5672/cell1")
    c2 = db_cells.cell_create(db, "cell2", "rabbit://guest:guest@127.0.0.1:5672/cell2")
    assert db_cells.cell_list(db) == [c1, c2]


def test_duplicate_name_conflicts(db: Database) -> None:
    db_cells.cell_create(db, "cell1", "rabbit://h/1")
    with pytest.raises(exception.CellExists):
        db_cells.cell_create(db, "cell1", "rabbit://h/2")
    assert len(db_cells.cell_list(db)) == 1


def test_update_name_and_url(db: Database) -> None:
    cell = db_cells.cell_create(db, "cell1", "rabbit://h/1")
    updated = db_cells.cell_update(db, "cell1", name="cellA", transport_url="rabbit://h/A")
    assert updated["uuid"] == cell["uuid"]
    assert db_cells.cell_list(db) == [updated]
    assert updated["name"] == "cellA" and updated["transport_url"] == "rabbit://h/A"
    assert db_cells.cell_update(db, cell["uuid"], name="cellB")["name"] == "cellB"  # by uuid
    with pytest.raises(exception.CellNotFound):
        db_cells.cell_update(db, "cell1", name="again")


def test_delete(db: Database) -> None:
    db_cells.cell_create(db, "cell1", "rabbit://h/1")
    db_cells.cell_delete(db, "cell1")
    assert db_cells.cell_list(db) == []
    with pytest.raises(exception.CellNotFound):
        db_cells.cell_delete(db, "cell1")


def test_delete_refuses_while_services_are_mapped(db: Database) -> None:
    cell = db_cells.cell_create(db, "cell1", "rabbit://h/1")
    db_services.service_register(db, "c1", "fleetcache-compute", "compute", cell["id"])
    with pytest.raises(exception.Conflict, match="c1"):
        db_cells.cell_delete(db, "cell1")
    assert len(db_cells.cell_list(db)) == 1
