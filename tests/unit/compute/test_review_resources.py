"""Review finding in fleetcache.compute.resources: a Nova fragment's ``*_allocation_ratio =
0.0`` (Nova's pre-Stein default, in many old nova.conf files) means "unset" in Nova; here it
became an allocation ratio of 0, so the host's capacity in Placement is 0."""

from __future__ import annotations

import pathlib

import pytest
from oslo_config import cfg

from fleetcache.common import config
from fleetcache.compute import resources
from fleetcache.compute.resources import HostSize


@pytest.fixture
def conf(tmp_path: pathlib.Path) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([], project="fleetcache", default_config_files=[])
    conf.set_override("instances_path", str(tmp_path))
    return conf


@pytest.mark.parametrize(("option", "rc", "initial"), [
    ("cpu_allocation_ratio", "VCPU", 4.0),
    ("ram_allocation_ratio", "MEMORY_MB", 1.0),
    ("disk_allocation_ratio", "DISK_GB", 1.0),
])
def test_a_zero_ratio_from_a_nova_fragment_means_the_initial_ratio(
    conf: cfg.ConfigOpts, option: str, rc: str, initial: float
) -> None:
    # Nova (nova/conf/compute.py): "If this option is set to something *other than* None or
    # 0.0, the allocation ratio will be overwritten by the value of this option".
    conf.set_override(option, 0.0)
    inventory = resources.inventory(conf, HostSize(vcpus=8, memory_mb=16384, disk_gb=100))
    record = inventory[rc]
    capacity = (record["total"] - record["reserved"]) * record["allocation_ratio"]
    assert record["allocation_ratio"] == initial, (
        f"{option} = 0.0 gives Placement capacity {capacity}")
