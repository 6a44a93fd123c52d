"""``fleetcache-manage db sync`` upgrades a 0012 database: jobs stored before have no terms
and no next start, and read as jobs without terms."""

from __future__ import annotations

import datetime

import pytest
import sqlalchemy
from alembic import command

from fleetcache.common.db import jobs, migration
from fleetcache.common.db.session import Database
from tests.functional.db.schema import drop_all

pytestmark = pytest.mark.db

WHEN = datetime.datetime(2026, 11, 1, 12, 0, 0)
JOB = "00000000-0000-4000-8000-000000000013"
IMAGE = "00000000-0000-4000-8000-000000000003"


def test_upgrade_from_0012_keeps_jobs_without_terms(db: Database) -> None:
    drop_all(db)
    migration.db_sync(db, "0012")
    tables = sqlalchemy.MetaData()
    job_rows = sqlalchemy.Table("cache_jobs", tables,
                                sqlalchemy.Column("image_ids", sqlalchemy.JSON),
                                sqlalchemy.Column("hosts", sqlalchemy.JSON),
                                autoload_with=db.engine)
    assert "terms" not in job_rows.c
    with db.engine.begin() as connection:
        connection.execute(job_rows.insert().values(
            uuid=JOB, aggregate_id=1, aggregate_uuid=JOB, image_ids=[IMAGE], state="done",
            total_hosts=1, created_at=WHEN, hosts=["c1"]))

    migration.db_sync(db)

    job = jobs.job_get(db, JOB)
    assert (job["state"], job["terms"], job["next_start_at"]) == ("done", {}, None)


def test_downgrade_to_0012_drops_only_the_terms_columns(db: Database) -> None:
    command.downgrade(migration._config(db), "0012")

    columns = {c["name"] for c in sqlalchemy.inspect(db.engine).get_columns("cache_jobs")}
    assert "terms" not in columns and "next_start_at" not in columns
    assert {"pin_until", "catch_up_until", "hosts"} <= columns
    migration.db_sync(db)
    assert migration.db_version(db) == migration.head_revision()
