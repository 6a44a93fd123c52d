"""``fleetcache-manage db sync`` upgrades a 0009 database: services registered before keep
their rows with no address, flavors have empty access lists; the downgrade drops only those."""

from __future__ import annotations

import pytest
import sqlalchemy
from alembic import command

from fleetcache.common.db import flavors, migration, models
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database

pytestmark = pytest.mark.db


def test_upgrade_from_0009_keeps_services_without_an_address(db: Database) -> None:
    metadata = sqlalchemy.MetaData()
    metadata.reflect(db.engine)
    metadata.drop_all(db.engine)
    migration.db_sync(db, "0009")
    # The ORM models the head schema: the 0009 rows are written raw.
    tables = sqlalchemy.MetaData()
    # MariaDB reflects JSON as text: name the type the model writes.
    services = sqlalchemy.Table("services", tables,
                                sqlalchemy.Column("capabilities", sqlalchemy.JSON),
                                autoload_with=db.engine)
    flavor_rows = sqlalchemy.Table("flavors", tables, autoload_with=db.engine)
    assert "host_ip" not in services.c
    assert not sqlalchemy.inspect(db.engine).has_table("flavor_projects")
    now = models.utcnow()
    with db.engine.begin() as connection:
        connection.execute(services.insert().values(
            uuid="6f9619ff-8b86-d011-b42d-00c04fc964ff", host="c1", binary="fleetcache-compute",
            topic="compute", disabled=False, forced_down=False, report_count=1,
            capabilities={}, created_at=now))
        connection.execute(flavor_rows.insert().values(
            flavorid="f1", name="m1", vcpus=1, memory_mb=64, root_gb=1, ephemeral_gb=0, swap=0,
            is_public=False, created_at=now))

    migration.db_sync(db, "0010")

    assert migration.db_version(db) == "0010"
    migration.db_sync(db)  # the ORM models the head schema (0011 adds flavor columns)
    assert db_services.service_get(db, "c1", "fleetcache-compute")["host_ip"] is None
    assert flavors.flavor_projects(db, "f1") == []
    assert flavors.flavor_access_add(db, "f1", "p1") == ["p1"]
    registered = db_services.service_register(db, "c1", "fleetcache-compute", "compute", None,
                                              host_ip="192.0.2.1")
    assert registered["host_ip"] == "192.0.2.1"


def test_downgrade_to_0009_drops_the_address_and_the_access_lists(db: Database) -> None:
    db_services.service_register(db, "c1", "fleetcache-compute", "compute", None,
                                 host_ip="192.0.2.1")
    flavors.flavor_create(db, "m1", 1, 64, 1, flavorid="f1", is_public=False)
    flavors.flavor_access_add(db, "f1", "p1")
    command.downgrade(migration._config(db), "0009")
    inspector = sqlalchemy.inspect(db.engine)
    assert "host_ip" not in {c["name"] for c in inspector.get_columns("services")}
    assert not inspector.has_table("flavor_projects")
    services = sqlalchemy.Table("services", sqlalchemy.MetaData(), autoload_with=db.engine)
    with db.engine.connect() as connection:
        assert connection.execute(sqlalchemy.select(services.c.host)).scalars().all() == ["c1"]
    migration.db_sync(db)
    assert migration.db_version(db) == migration.head_revision()
