"""The migrations build exactly the schema the models describe, on every backend."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from fleetcache.common.db import migration, models
from fleetcache.common.db.session import Database

pytestmark = pytest.mark.db


def test_synced_schema_is_at_head(db: Database) -> None:
    assert migration.db_version(db) == migration.head_revision()


def test_models_and_migrations_agree(db: Database) -> None:
    with db.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, models.Base.metadata)
    assert diff == []


def test_sync_twice_is_a_no_op(db: Database) -> None:
    migration.db_sync(db)
    assert migration.db_version(db) == migration.head_revision()
