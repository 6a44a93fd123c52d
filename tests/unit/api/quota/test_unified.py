"""The unified limits driver: oslo.limit's enforcer over Keystone's limits (oslo.limit's own
fixture stands in for Keystone) and fleetcache's count of the project's instances."""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Iterator

import pytest
from oslo_config import cfg
from oslo_limit import exception as limit_exceptions
from oslo_limit import fixture as limit_fixture

from fleetcache.api import quota
from fleetcache.api.quota import unified
from fleetcache.common import exception
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db import migration
from fleetcache.common.db.session import Database

SMALL = {"class:VCPU": 2, "class:MEMORY_MB": 512}
REGISTERED = {"servers": 5, "class:VCPU": 8, "class:MEMORY_MB": 4096,
              "server_metadata_items": 3}


def _info(name: str, limit: int, used: int, delta: int) -> limit_exceptions.OverLimitInfo:
    return limit_exceptions.OverLimitInfo(name, limit, used, delta)


@pytest.fixture
def db(tmp_path: pathlib.Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path}/quota.sqlite")
    migration.db_sync(database)
    yield database
    database.dispose()


@pytest.fixture
def driver(conf: cfg.ConfigOpts, db: Database) -> Iterator[quota.BaseQuotaDriver]:
    quota.register_opts(conf)
    conf.set_override("endpoint_id", "compute-endpoint", group="oslo_limit")
    fixture = limit_fixture.LimitFixture(dict(REGISTERED), {"p2": {"servers": -1}})
    fixture.setUp()
    try:
        yield quota.get_driver(conf, db)
    finally:
        fixture.cleanUp()


def _servers(db: Database, project: str, count: int, vcpus: int = 2) -> None:
    db_instances.instances_create(db, [db_instances.InstanceCreate(
        uuid=str(uuid.uuid4()), project_id=project,
        user_id="u", display_name="vm", image_ref="i", reservation_id="r", launch_index=n,
        flavor={"vcpus": vcpus, "memory_mb": 512, "root_gb": 0}, availability_zone=None,
        requested_host=None) for n in range(count)])


def test_fitting_count_is_what_every_exceeded_limit_leaves_room_for() -> None:
    over = [_info("class:VCPU", 8, 2, 20), _info("servers", 5, 1, 10)]
    assert unified.fitting_count(over, SMALL, 10) == 3
    assert unified.fitting_count([_info("servers", 5, 7, 1)], SMALL, 1) == 0


def test_exceeded_is_novas_message_with_the_limits_still_exceeded_at_the_count() -> None:
    over = [_info("class:MEMORY_MB", 4096, 0, 5120), _info("servers", 5, 4, 10)]
    error = unified.exceeded(over, SMALL, 2)
    assert error.code == 403
    assert error.message == ("Quota exceeded for instances: Requested 2, but already used 4 "
                             "of 5 instances")
    both = unified.exceeded([_info("class:VCPU", 8, 8, 2), _info("servers", 5, 5, 1)], SMALL, 1)
    assert both.message == ("Quota exceeded for cores, instances: Requested 2, 1, but already "
                            "used 8, 5 of 8, 5 cores, instances")


def test_allowed_servers_counts_the_database(driver: quota.BaseQuotaDriver,
                                             db: Database) -> None:
    _servers(db, "p1", 2)
    check = driver.check("p1")
    assert check.allowed_servers(SMALL, 1, 1) == 1
    assert check.allowed_servers(SMALL, 1, 100) == 2  # VCPU: 4 of 8 used, 2 a server
    with pytest.raises(exception.QuotaExceeded, match="Requested 6, but already used 4 of 8"):
        check.allowed_servers(SMALL, 3, 5)


def test_an_unlimited_project_limit_allows_any_count(driver: quota.BaseQuotaDriver,
                                                     db: Database) -> None:
    assert driver.check("p2").allowed_servers({}, 1, 1000) == 1000


def test_recheck_fails_once_the_project_is_over(driver: quota.BaseQuotaDriver,
                                                db: Database) -> None:
    check = driver.check("p1")
    _servers(db, "p1", 4)
    check.recheck_servers(SMALL)  # 8 of 8 VCPU: at the limit, not over it
    _servers(db, "p1", 1, vcpus=1)
    with pytest.raises(exception.QuotaExceeded, match="cores"):
        check.recheck_servers(SMALL)


def test_metadata_items_use_the_registered_limit(driver: quota.BaseQuotaDriver) -> None:
    check = driver.check("p1")
    check.check_metadata_items(3)
    with pytest.raises(Exception, match="at most 3 metadata items"):
        check.check_metadata_items(4)


def test_project_quotas_and_defaults_by_legacy_name(driver: quota.BaseQuotaDriver,
                                                    db: Database) -> None:
    _servers(db, "p1", 1)
    quotas = driver.project_quotas("p1")
    assert quotas["instances"] == quota.QuotaUsage(5, 1)
    assert quotas["cores"] == quota.QuotaUsage(8, 2)
    assert quotas["metadata_items"] == quota.QuotaUsage(3, 0)
    assert quotas["key_pairs"].limit == 0  # no registered limit: oslo.limit's 0
    assert quotas["fixed_ips"].limit == -1
    assert driver.project_quotas("p2")["instances"].limit == -1
    assert driver.default_quotas()["instances"] == 5


def test_without_keystone_every_check_is_limits_unavailable(conf: cfg.ConfigOpts,
                                                            db: Database) -> None:
    quota.register_opts(conf)
    check = quota.get_driver(conf, db).check("p1")
    with pytest.raises(exception.LimitsUnavailable, match=r"\[oslo_limit\]"):
        check.allowed_servers(SMALL, 1, 1)
