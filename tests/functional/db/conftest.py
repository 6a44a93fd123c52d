"""The ``db`` fixture: a freshly synced schema on SQLite, PostgreSQL and MariaDB in turn.

Every test taking ``db`` runs once per backend, on an empty schema built by ``db_sync`` after
every table was dropped. PostgreSQL and MariaDB must answer (``tools/test-services.sh``
checks them and creates ``fleetcache_test``): an unreachable server FAILS the test, it is
never skipped. The URLs can be changed with ``FLEETCACHE_TEST_POSTGRESQL_URL`` and
``FLEETCACHE_TEST_MYSQL_URL``.

NOTE: several test runs may share the machine's servers; an advisory lock held for the whole
test (``pg_advisory_lock`` / ``GET_LOCK``) keeps them from dropping each other's tables.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy
from sqlalchemy import text

from fleetcache.common.db import migration
from fleetcache.common.db.session import Database

BACKENDS = {
    "sqlite": None,
    "postgresql": os.environ.get(
        "FLEETCACHE_TEST_POSTGRESQL_URL",
        "postgresql+psycopg2://postgres@127.0.0.1:5432/fleetcache_test",
    ),
    "mysql": os.environ.get(
        "FLEETCACHE_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/fleetcache_test"
    ),
}
LOCK_NAME = "fleetcache_test_schema"
LOCK_TIMEOUT = 300


def _lock(conn: sqlalchemy.Connection, backend: str) -> None:
    if backend == "postgresql":
        conn.execute(text("SELECT pg_advisory_lock(hashtext(:n))"), {"n": LOCK_NAME})
    elif backend == "mysql":
        got = conn.execute(text("SELECT GET_LOCK(:n, :t)"),
                           {"n": LOCK_NAME, "t": LOCK_TIMEOUT}).scalar()
        if got != 1:
            pytest.fail(f"another test run held the MariaDB lock {LOCK_NAME} for "
                        f"{LOCK_TIMEOUT} s")
    conn.commit()


def _drop_everything(db: Database) -> None:
    metadata = sqlalchemy.MetaData()
    metadata.reflect(db.engine)
    metadata.drop_all(db.engine)


@pytest.fixture(params=list(BACKENDS))
def db(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[Database]:
    backend: str = request.param
    url = BACKENDS[backend] or f"sqlite:///{tmp_path}/fleetcache.sqlite"
    database = Database(url)
    try:
        lock_conn = database.engine.connect()
    except sqlalchemy.exc.OperationalError as exc:
        database.dispose()
        pytest.fail(f"{backend} at {url} does not answer ({exc.orig}); the DB tests need it: "
                    f"run tools/test-services.sh", pytrace=False)
    try:
        _lock(lock_conn, backend)
        _drop_everything(database)
        migration.db_sync(database)
        yield database
    finally:
        lock_conn.close()  # closing the session releases the advisory lock
        database.dispose()


@contextlib.contextmanager
def _rows_built(model: type[Any]) -> Iterator[list[object]]:
    built: list[object] = []

    def on_load(target: object, _context: object) -> None:
        built.append(target)

    sqlalchemy.event.listen(model, "load", on_load)
    try:
        yield built
    finally:
        sqlalchemy.event.remove(model, "load", on_load)


@pytest.fixture
def rows_built() -> Callable[[type[Any]], contextlib.AbstractContextManager[list[object]]]:
    """``with rows_built(models.X) as built:``: the ORM objects of ``X`` loaded from the
    database while the block runs (a query that should read columns only builds none)."""
    return _rows_built


@pytest.fixture
def sql_texts(db: Database) -> Iterator[list[str]]:
    """Every SQL text the database is sent while the test runs, in order (one entry per
    execution): how many distinct texts a query takes tells how many prepared statements
    SQLite's driver caches for it."""
    sent: list[str] = []

    def before(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        sent.append(statement)

    sqlalchemy.event.listen(db.engine, "before_cursor_execute", before)
    try:
        yield sent
    finally:
        sqlalchemy.event.remove(db.engine, "before_cursor_execute", before)
