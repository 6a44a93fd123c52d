"""``fleetcache-manage db sync`` upgrades a 0013 database: the download leases taken before
stay, and the waiters start empty (conductors before job priorities registered none)."""

from __future__ import annotations

import datetime

import pytest
import sqlalchemy
from alembic import command

from fleetcache.common.db import download_leases, migration, models
from fleetcache.common.db.download_leases import Limits
from fleetcache.common.db.session import Database
from tests.functional.db.schema import drop_all

pytestmark = pytest.mark.db


def test_upgrade_from_0013_keeps_the_leases_and_has_no_waiters(db: Database) -> None:
    drop_all(db)
    migration.db_sync(db, "0013")
    assert "download_waiters" not in sqlalchemy.inspect(db.engine).get_table_names()
    # The ORM models the head schema: the 0013 lease is written raw.
    leases = sqlalchemy.Table("download_leases", sqlalchemy.MetaData(), autoload_with=db.engine)
    with db.engine.begin() as connection:
        connection.execute(leases.insert().values(
            holder="cond1", host="c1", image_id="A", created_at=models.utcnow(),
            expires_at=models.utcnow() + datetime.timedelta(minutes=5)))

    migration.db_sync(db, "0014")

    assert migration.db_version(db) == "0014"
    assert [lease["host"] for lease in download_leases.leases_list(db)] == ["c1"]
    assert download_leases.waiters_list(db, live_only=False) == []
    refused = download_leases.lease_acquire(db, "cond1", "c2", "A", Limits(total=1), 60)
    assert refused.lease_id is None and refused.waiter_id is not None


def test_downgrade_to_0013_drops_only_the_waiters(db: Database) -> None:
    command.downgrade(migration._config(db), "0013")

    tables = set(sqlalchemy.inspect(db.engine).get_table_names())
    assert "download_waiters" not in tables
    assert {"download_leases", "download_gates"} <= tables
    migration.db_sync(db)
    assert migration.db_version(db) == migration.head_revision()
