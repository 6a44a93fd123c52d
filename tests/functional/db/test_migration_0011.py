"""``fleetcache-manage db sync`` upgrades a 0010 database: the servers and flavors made before
keep everything and show Nova's defaults for what 0011 adds (no description, access
addresses or metadata, disk config ``MANUAL``, ``rxtx_factor`` 1.0)."""

from __future__ import annotations

import datetime

import pytest
import sqlalchemy
from alembic import command

from fleetcache.common.db import flavors, instances, migration
from fleetcache.common.db.session import Database
from tests.functional.db.schema import drop_all

pytestmark = pytest.mark.db

WHEN = datetime.datetime(2026, 11, 1, 12, 0, 0)
UUID = "00000000-0000-4000-8000-000000000001"


def test_upgrade_from_0010_keeps_servers_and_flavors(db: Database) -> None:
    drop_all(db)
    migration.db_sync(db, "0010")
    # The ORM models the head schema: the 0010 rows are written raw.
    tables = sqlalchemy.MetaData()
    # MariaDB reflects a JSON column as LONGTEXT: say what it holds.
    rows = sqlalchemy.Table("instances", tables, sqlalchemy.Column("flavor", sqlalchemy.JSON),
                            autoload_with=db.engine)
    flavor_rows = sqlalchemy.Table("flavors", tables, autoload_with=db.engine)
    assert "access_ip_v4" not in rows.c and "rxtx_factor" not in flavor_rows.c
    with db.engine.begin() as connection:
        connection.execute(flavor_rows.insert().values(
            flavorid="f1", name="m1", vcpus=1, memory_mb=512, root_gb=1, ephemeral_gb=0,
            swap=0, is_public=True, created_at=WHEN))
        connection.execute(rows.insert().values(
            uuid=UUID, project_id="p1", user_id="u1", display_name="vm1", image_ref="img",
            flavor={"flavorid": "f1"}, reservation_id="r-1", launch_index=0,
            vm_state="active", created_at=WHEN))

    migration.db_sync(db, "0011")

    assert migration.db_version(db) == "0011"
    server = instances.instance_get(db, UUID)
    assert server["display_name"] == "vm1" and server["vm_state"] == "active"
    assert (server["display_description"], server["access_ip_v4"], server["access_ip_v6"],
            server["auto_disk_config"], server["metadata"]) == (None, None, None, False, {})
    assert flavors.flavor_get(db, "f1")["rxtx_factor"] == 1.0


def test_downgrade_to_0010_drops_only_what_0011_added(db: Database) -> None:
    flavors.flavor_create(db, "m1", 1, 512, 1, flavorid="f1", rxtx_factor=2.0)
    flavors.extra_specs_update(db, "f1", {"k": "v"})
    (server,) = instances.instances_create(db, [instances.InstanceCreate(
        uuid=UUID, project_id="p1", user_id="u1", display_name="vm1", image_ref="img",
        flavor={"flavorid": "f1"}, reservation_id="r-1", launch_index=0,
        availability_zone=None, requested_host=None, metadata={"k": "v"},
        access_ip_v4="192.0.2.1")])
    command.downgrade(migration._config(db), "0010")
    inspector = sqlalchemy.inspect(db.engine)
    columns = {c["name"] for c in inspector.get_columns("instances")}
    assert not columns & {"access_ip_v4", "user_metadata", "display_description"}
    assert "rxtx_factor" not in {c["name"] for c in inspector.get_columns("flavors")}
    rows = sqlalchemy.Table("instances", sqlalchemy.MetaData(), autoload_with=db.engine)
    specs = sqlalchemy.Table("flavor_extra_specs", sqlalchemy.MetaData(),
                             autoload_with=db.engine)
    with db.engine.connect() as connection:
        assert connection.execute(sqlalchemy.select(rows.c.uuid)).scalars().all() == [UUID]
        # SQLite's DROP TABLE would have cascaded to them (a batch copy of "flavors").
        assert connection.execute(sqlalchemy.select(specs.c.key)).scalars().all() == ["k"]
    migration.db_sync(db)
    assert migration.db_version(db) == migration.head_revision()
