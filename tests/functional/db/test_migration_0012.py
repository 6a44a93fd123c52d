"""``fleetcache-manage db sync`` upgrades a 0011 database: the job results stored before keep
everything, with no peer source and no peer bytes (computes before peer distribution)."""

from __future__ import annotations

import datetime

import pytest
import sqlalchemy
from alembic import command

from fleetcache.common.db import migration
from fleetcache.common.db.session import Database
from tests.functional.db.schema import drop_all

pytestmark = pytest.mark.db

WHEN = datetime.datetime(2026, 11, 1, 12, 0, 0)
JOB = "00000000-0000-4000-8000-000000000002"
IMAGE = "00000000-0000-4000-8000-000000000003"


def test_upgrade_from_0011_keeps_job_results(db: Database) -> None:
    drop_all(db)
    migration.db_sync(db, "0011")
    # The ORM models the head schema: the 0011 rows are written raw.
    tables = sqlalchemy.MetaData()
    job_rows = sqlalchemy.Table("cache_jobs", tables,
                                sqlalchemy.Column("image_ids", sqlalchemy.JSON),
                                sqlalchemy.Column("hosts", sqlalchemy.JSON),
                                autoload_with=db.engine)
    result_rows = sqlalchemy.Table("cache_job_results", tables, autoload_with=db.engine)
    assert "source_host" not in result_rows.c
    with db.engine.begin() as connection:
        job_id = connection.execute(job_rows.insert().values(
            uuid=JOB, aggregate_id=1, aggregate_uuid=JOB, image_ids=[IMAGE], state="done",
            total_hosts=1, created_at=WHEN, hosts=["c1"])).inserted_primary_key[0]
        connection.execute(result_rows.insert().values(
            job_id=job_id, host="c1", image_id=IMAGE, state="cached", bytes_downloaded=5,
            download_path="http", updated_at=WHEN))

    migration.db_sync(db, "0012")

    assert migration.db_version(db) == "0012"
    # Read raw too: the ORM's jobs have the columns of later revisions.
    results = sqlalchemy.Table("cache_job_results", sqlalchemy.MetaData(),
                               autoload_with=db.engine)
    with db.engine.connect() as connection:
        (result,) = connection.execute(results.select()).mappings()
    assert (result["state"], result["bytes_downloaded"], result["download_path"]) == (
        "cached", 5, "http")
    assert (result["source_host"], result["bytes_from_peers"]) == (None, None)


def test_downgrade_to_0011_drops_only_the_peer_columns(db: Database) -> None:
    command.downgrade(migration._config(db), "0011")

    columns = {c["name"] for c in sqlalchemy.inspect(db.engine).get_columns("cache_job_results")}
    assert "source_host" not in columns and "bytes_from_peers" not in columns
    assert {"download_path", "fallback_reason"} <= columns
    migration.db_sync(db)
    assert migration.db_version(db) == migration.head_revision()
