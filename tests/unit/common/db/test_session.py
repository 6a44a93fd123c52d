"""The SQLite connections' settings."""

from __future__ import annotations

import pathlib

from sqlalchemy import text

from fleetcache.common.db.session import SQLITE_CACHE_KIB, Database


def test_every_sqlite_connection_has_a_small_page_cache(tmp_path: pathlib.Path) -> None:
    """Each connection of the pool keeps a page cache of its own: all of them are bounded."""
    db = Database(f"sqlite:///{tmp_path}/fc.sqlite")
    try:
        with db.engine.connect() as first, db.engine.connect() as second:
            sizes = [c.execute(text("PRAGMA cache_size")).scalar() for c in (first, second)]
            modes = [c.execute(text("PRAGMA journal_mode")).scalar() for c in (first, second)]
    finally:
        db.dispose()
    assert sizes == [-SQLITE_CACHE_KIB] * 2  # negative: KiB
    assert SQLITE_CACHE_KIB < 2000  # SQLite's default
    assert modes == ["wal", "wal"]
