"""What the migration tests share: an empty database to sync from an old revision."""

from __future__ import annotations

import sqlalchemy

from fleetcache.common.db.session import Database


def drop_all(db: Database) -> None:
    """Drop every table, whatever revision made it (reflected, not the ORM's head)."""
    metadata = sqlalchemy.MetaData()
    metadata.reflect(db.engine)
    metadata.drop_all(db.engine)
