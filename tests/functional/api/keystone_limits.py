"""Keystone's unified limits for in-process API tests: oslo.limit's own fixture
(``oslo_limit.fixture.LimitFixture``) answers the enforcer's Keystone calls with the given
registered and project limits, and ``[quota] driver = unified_limits`` with an endpoint id
makes the API read them through oslo.limit as it does on the real stack."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from oslo_config import cfg
from oslo_limit import fixture as limit_fixture

from fleetcache.api import quota

#: The local stack's registered limits (tools/keystone/setup_identity.py registers them).
REGISTERED = {"servers": 10, "class:VCPU": 20, "class:MEMORY_MB": 51200, "class:DISK_GB": 20,
              "server_metadata_items": 128, "server_injected_files": 5,
              "server_injected_file_content_bytes": 10240,
              "server_injected_file_path_bytes": 255, "server_key_pairs": 100,
              "server_groups": 10, "server_group_members": 10}


def use_unified_limits(conf: cfg.ConfigOpts) -> None:
    """Point ``conf`` at unified limits (the fixture stands in for Keystone's endpoint)."""
    quota.register_opts(conf)
    conf.set_override("driver", "unified_limits", group="quota")
    conf.set_override("endpoint_id", "compute-endpoint", group="oslo_limit")


@contextlib.contextmanager
def keystone_limits(registered: dict[str, int],
                    projects: dict[str, dict[str, int]] | None = None) -> Iterator[
                        limit_fixture.LimitFixture]:
    """Keystone holds ``registered`` limits and the ``projects``' own, while in the block
    (copies: a test changes them through the fixture's ``reglimits`` and ``projlimits``)."""
    fixture = limit_fixture.LimitFixture(
        dict(registered), {project: dict(own) for project, own in (projects or {}).items()})
    fixture.setUp()
    try:
        yield fixture
    finally:
        fixture.cleanUp()
