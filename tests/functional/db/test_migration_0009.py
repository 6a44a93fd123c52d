"""``fleetcache-manage db sync`` upgrades a 0008 database: the cache reports stored before
keep their images, none of them pinned, and the next report stores its pins."""

from __future__ import annotations

import datetime

import pytest
import sqlalchemy
from alembic import command

from fleetcache.common.db import host_images, migration
from fleetcache.common.db.session import Database

pytestmark = pytest.mark.db

T0 = 1_800_000_000.5


def test_upgrade_from_0008_keeps_reports_unpinned(db: Database) -> None:
    metadata = sqlalchemy.MetaData()
    metadata.reflect(db.engine)
    metadata.drop_all(db.engine)
    migration.db_sync(db, "0008")
    # The ORM models the head schema: the 0008 rows are written raw.
    tables = sqlalchemy.MetaData()
    rows = sqlalchemy.Table("host_images", tables, autoload_with=db.engine)
    caches = sqlalchemy.Table("host_image_caches", tables, autoload_with=db.engine)
    assert "pinned_until" not in rows.c
    when = host_images.from_epoch(T0)
    with db.engine.begin() as connection:
        connection.execute(caches.insert().values(host="h1", usage_bytes=10, image_count=1,
                                                  reported_at=when, updated_at=when))
        connection.execute(rows.insert().values(host="h1", image_id="a", size=10,
                                                last_used=when, updated_at=when))

    migration.db_sync(db, "0009")

    assert migration.db_version(db) == "0009"
    summary, images = host_images.host_cache_get(db, "h1")
    assert summary is not None and summary["image_count"] == 1
    assert images == [{"image_id": "a", "size": 10, "last_used": when, "pinned_until": None}]
    assert host_images.set_host_images(db, "h1", [
        {"image_id": "a", "size": 10, "last_used": T0, "pinned_until": T0 + 60.25}],
        10, reported_at=T0 + 1)
    [image] = host_images.host_cache_get(db, "h1")[1]
    assert image["pinned_until"] == when + datetime.timedelta(seconds=60.25)


def test_downgrade_to_0008_drops_only_the_pins(db: Database) -> None:
    host_images.set_host_images(db, "h1", [
        {"image_id": "a", "size": 10, "last_used": T0, "pinned_until": T0 + 60}], 10,
        reported_at=T0)
    command.downgrade(migration._config(db), "0008")
    rows = sqlalchemy.Table("host_images", sqlalchemy.MetaData(), autoload_with=db.engine)
    assert "pinned_until" not in rows.c
    with db.engine.connect() as connection:
        assert connection.execute(sqlalchemy.select(rows.c.image_id)).scalars().all() == ["a"]
    migration.db_sync(db)
    assert migration.db_version(db) == migration.head_revision()
