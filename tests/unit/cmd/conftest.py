"""Commands set up oslo.log, which takes over the root logger: give it back after each test.
And a synced SQLite database for the commands that need one."""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Iterator

import pytest

from fleetcache.common.db import migration
from fleetcache.common.db.session import Database


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)


@pytest.fixture
def synced_db(tmp_path: pathlib.Path) -> str:
    url = f"sqlite:///{tmp_path}/fleetcache.sqlite"
    db = Database(url)
    migration.db_sync(db)
    db.dispose()
    return url
