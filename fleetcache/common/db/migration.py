"""The schema as a whole: alembic migrations (``fleetcache-manage db sync``) and emptying it."""

from __future__ import annotations

import os

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import delete

from fleetcache.common.db import models
from fleetcache.common.db.session import Database

_SCRIPT_LOCATION = os.path.join(os.path.dirname(__file__), "alembic")


def _config(db: Database) -> Config:
    config = Config()
    config.set_main_option("script_location", _SCRIPT_LOCATION)
    config.attributes["engine"] = db.engine
    return config


def db_sync(db: Database, revision: str = "head") -> None:
    """Upgrade the schema to ``revision``."""
    command.upgrade(_config(db), revision)


def db_version(db: Database) -> str | None:
    """The revision the database is at, or ``None`` when it was never synced."""
    with db.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    """The newest revision this code knows (what ``db_sync`` upgrades to)."""
    config = Config()
    config.set_main_option("script_location", _SCRIPT_LOCATION)
    return ScriptDirectory.from_config(config).get_current_head()


def purge_all(db: Database) -> None:
    """Delete the rows of the fleet's tables (``bench/_fleet.py``, before it writes a fleet)."""
    with db.transaction() as session:
        for model in (
            models.CacheJobResult,
            models.CacheJob,
            models.AggregateMetadata,
            models.AggregateHost,
            models.Aggregate,
            models.Service,
            models.Cell,
        ):
            session.execute(delete(model))
