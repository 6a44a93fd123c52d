"""A synced SQLite database for the commands that need one. (What a command's oslo.log set-up
does to the root logger is undone after every test by tests/conftest.py.)"""

from __future__ import annotations

import pathlib

import pytest

from fleetcache.common.db import migration
from fleetcache.common.db.session import Database


@pytest.fixture
def synced_db(tmp_path: pathlib.Path) -> str:
    url = f"sqlite:///{tmp_path}/fleetcache.sqlite"
    db = Database(url)
    migration.db_sync(db)
    db.dispose()
    return url
