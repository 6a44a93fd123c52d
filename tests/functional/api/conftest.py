"""The real API application over SQLite in ``tmp_path``, in noauth mode, driven by WebTest."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
import webtest
from oslo_config import cfg

from fleetcache.api import wsgi
from fleetcache.common.db import migration
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import StubComputeAPI, StubConductorAPI


@pytest.fixture
def conf(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> cfg.ConfigOpts:
    """The shared configuration (tests/conftest.py) with a SQLite database of the test's own,
    no authentication (the API trusts the identity headers the test sends) and no quota
    (no Keystone: ``test_quotas.py`` sets Keystone's limits up with oslo.limit's fixture)."""
    conf.set_override("connection", f"sqlite:///{tmp_path}/api.sqlite", group="database")
    conf.set_override("auth_strategy", "noauth", group="api")
    conf.set_override("driver", "noop", group="quota")
    return conf


@pytest.fixture
def db(conf: cfg.ConfigOpts) -> Iterator[Database]:
    database = Database.from_conf(conf)
    migration.db_sync(database)
    yield database
    database.dispose()


@pytest.fixture
def conductor(db: Database) -> StubConductorAPI:
    return StubConductorAPI(db)


@pytest.fixture
def compute_api() -> StubComputeAPI:
    return StubComputeAPI()


@pytest.fixture
def app(conf: cfg.ConfigOpts, db: Database, conductor: StubConductorAPI,
        compute_api: StubComputeAPI) -> webtest.TestApp:
    return webtest.TestApp(wsgi.init_application(conf, conductor_api=conductor,
                                                 compute_api=compute_api))


@pytest.fixture
def computes(db: Database) -> list[str]:
    hosts = ["c1", "c2", "c3"]
    for host in hosts:
        db_services.service_register(db, host, "fleetcache-compute", "compute", None)
    return hosts
