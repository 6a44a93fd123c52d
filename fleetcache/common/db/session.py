"""Engine and session handling for the fleetcache database.

NOTE: plain SQLAlchemy 2 rather than oslo.db: the query layer is small, typed, and needs only
pooling, pre-ping and one transaction per call, which SQLAlchemy gives directly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import sqlalchemy
from oslo_config import cfg
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker


class Database:
    """One engine and its session factory; pass it to the query functions."""

    def __init__(self, url: str, max_pool_size: int = 10, pool_recycle: int = 3600) -> None:
        self.url = url
        kwargs: dict[str, Any] = {"pool_pre_ping": True, "future": True}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        else:
            kwargs["pool_size"] = max_pool_size
            kwargs["pool_recycle"] = pool_recycle
        self.engine = sqlalchemy.create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_on_connect)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> Database:
        return cls(
            conf.database.connection,
            max_pool_size=conf.database.max_pool_size,
            pool_recycle=conf.database.pool_recycle,
        )

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error."""
        with self._sessions() as session, session.begin():
            yield session

    def dispose(self) -> None:
        self.engine.dispose()


#: Each SQLite connection's page cache, in KiB (SQLite's default: 2,000).
#:
#: NOTE: every connection of the pool fills a cache of its own, and keeps it, so with the
#: default SQLite's memory grew with the fleet a pre-cache job covered; 512 KiB cut most of
#: that growth, at the same CPU per host (``bench/conductor_memory.py``; docs/performance.md,
#: "SQLite's page cache and prepared statements").
#: In WAL mode a connection drops its whole cache when it starts a read after another
#: connection wrote (``pagerBeginReadTransaction`` in SQLite's pager.c), as the job's result
#: writer does every 0.2 s: what a larger cache keeps is read again only until then.
SQLITE_CACHE_KIB = 512


def _sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    # Foreign keys are off by default in SQLite; WAL lets readers run beside the one writer.
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")  # negative: KiB, not pages
    cursor.close()
