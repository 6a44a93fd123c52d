"""``fleetcache-manage db sync`` upgrades a 0002 database: every service gets
``placement_synced_at`` NULL (not yet in Placement) and keeps everything else."""

from __future__ import annotations

import pytest
import sqlalchemy

from fleetcache.common.db import migration
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from tests.functional.db.test_migration_0002 import insert_service

pytestmark = pytest.mark.db


def test_upgrade_from_0002_marks_every_service_not_yet_in_placement(db: Database) -> None:
    metadata = sqlalchemy.MetaData()
    metadata.reflect(db.engine)
    metadata.drop_all(db.engine)
    migration.db_sync(db, "0002")
    insert_service(db, "h1")

    migration.db_sync(db, "0003")

    assert migration.db_version(db) == "0003"
    migration.db_sync(db)  # the ORM models the head schema (0010 adds the services' host_ip)
    [service] = db_services.service_list(db)
    assert service["host"] == "h1" and service["placement_synced_at"] is None
    assert db_services.service_placement_synced(db, "h1", "fleetcache-compute", {})
    synced_at = db_services.service_get(db, "h1", "fleetcache-compute")["placement_synced_at"]
    assert synced_at is not None
