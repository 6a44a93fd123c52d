"""``fleetcache-manage db sync`` upgrades a 0001 database to the image cache tables."""

from __future__ import annotations

import pytest
import sqlalchemy

from fleetcache.common.db import host_images, migration
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from tests.stored_reports import stored_report

pytestmark = pytest.mark.db


def insert_service(db: Database, host: str) -> None:
    """A compute's row as a 0001/0002 schema holds it (the ORM models the head schema)."""
    services = sqlalchemy.Table("services", sqlalchemy.MetaData(), autoload_with=db.engine)
    # MariaDB reflects JSON as LONGTEXT: give it the text.
    empty = {} if isinstance(services.c.capabilities.type, sqlalchemy.JSON) else "{}"
    with db.engine.begin() as connection:
        connection.execute(services.insert().values(
            uuid=f"00000000-0000-0000-0000-{len(host):012d}", host=host,
            binary="fleetcache-compute", topic="compute", disabled=False, forced_down=False,
            report_count=1, capabilities=empty, created_at=sqlalchemy.func.now()))


def test_upgrade_from_0001_keeps_data_and_adds_host_images(db: Database) -> None:
    metadata = sqlalchemy.MetaData()
    metadata.reflect(db.engine)
    metadata.drop_all(db.engine)
    migration.db_sync(db, "0001")
    assert migration.db_version(db) == "0001"
    insert_service(db, "h1")
    assert "host_images" not in sqlalchemy.inspect(db.engine).get_table_names()

    migration.db_sync(db)

    assert migration.db_version(db) == migration.head_revision()
    assert [s["host"] for s in db_services.service_list(db)] == ["h1"]
    host_images.set_host_images(db, "h1", [{"image_id": "a", "size": 1, "last_used": 0.0}], 1)
    report = stored_report(db, "h1")
    assert report is not None and report["image_count"] == 1
