"""``[oslo_limit]``: checked at start-up, and handed to oslo.limit's global configuration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from oslo_config import cfg

from fleetcache.api.quota import limit_conf


@pytest.fixture
def global_conf() -> Iterator[cfg.ConfigOpts]:
    """oslo.limit's ``cfg.CONF``, its ``[oslo_limit]`` overrides removed afterwards."""
    yield cfg.CONF
    for name in cfg.CONF[limit_conf.GROUP]:
        cfg.CONF.clear_override(name, group=limit_conf.GROUP)


def test_problem_names_what_is_missing(conf: cfg.ConfigOpts) -> None:
    limit_conf.register_opts(conf)
    assert (limit_conf.problem(conf) or "").startswith("[oslo_limit] auth_type is not set")
    conf.set_override("auth_type", "password", group="oslo_limit")
    assert (limit_conf.problem(conf) or "").startswith("[oslo_limit] names no endpoint")
    conf.set_override("endpoint_service_type", "compute", group="oslo_limit")
    assert limit_conf.problem(conf) is None


def test_apply_hands_the_values_to_oslo_limits_global_conf(
        conf: cfg.ConfigOpts, global_conf: cfg.ConfigOpts) -> None:
    limit_conf.register_opts(conf)
    conf.set_override("auth_type", "password", group="oslo_limit")
    conf.set_override("endpoint_service_type", "compute", group="oslo_limit")
    conf.set_override("timeout", 7, group="oslo_limit")
    limit_conf.apply(conf)
    conf.set_override("username", "fleetcache", group="oslo_limit")  # a plugin option, now
    limit_conf.apply(conf)
    group = global_conf[limit_conf.GROUP]
    assert (group.auth_type, group.username, group.endpoint_service_type, group.timeout) == (
        "password", "fleetcache", "compute", 7)
