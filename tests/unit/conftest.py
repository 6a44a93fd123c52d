"""What the unit tests of the conductor and of its command share: a configuration on the
``fake://`` transport, a synced SQLite database, and the transports a service opens (closed
after each test). A test module may define its own ``conf`` (or ``db``) instead. Beside them, a
connected socket pair for the tests of code that reads a socket under a deadline."""

from __future__ import annotations

import pathlib
import socket
from collections.abc import Iterator

import pytest
from oslo_config import cfg

from fleetcache.common import rpc
from fleetcache.common.db import migration
from fleetcache.common.db.session import Database


@pytest.fixture
def conf(conf: cfg.ConfigOpts) -> cfg.ConfigOpts:
    """The shared configuration (tests/conftest.py) with oslo.messaging's options, on the
    in-process ``fake://`` transport."""
    rpc.register_opts(conf)
    conf.set_override("transport_url", "fake:///")
    return conf


@pytest.fixture
def db(tmp_path: pathlib.Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path}/conductor.sqlite")
    migration.db_sync(database)
    yield database
    database.dispose()


@pytest.fixture
def transports(conf: cfg.ConfigOpts) -> Iterator[rpc.Transports]:
    opened = rpc.Transports(conf)
    yield opened
    opened.cleanup()


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """Two connected sockets (``socket.socketpair``), closed after the test."""
    one, other = socket.socketpair()
    yield one, other
    one.close()
    other.close()
