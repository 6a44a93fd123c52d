"""The compute's Placement inventory and operator traits (fleetcache.compute.resources)."""

from __future__ import annotations

import pathlib

import pytest
from oslo_config import cfg

from fleetcache.compute import resources
from fleetcache.compute.resources import HostSize


@pytest.fixture
def conf(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> cfg.ConfigOpts:
    """The shared configuration, its ``instances_path`` the test's directory (measured)."""
    conf.set_override("instances_path", str(tmp_path))
    return conf


def test_defaults_are_novas(conf: cfg.ConfigOpts) -> None:
    inventory = resources.inventory(conf, HostSize(vcpus=8, memory_mb=16384, disk_gb=100))
    assert inventory["VCPU"] == {"total": 8, "reserved": 0, "min_unit": 1, "max_unit": 8,
                                 "step_size": 1, "allocation_ratio": 4.0}
    assert inventory["MEMORY_MB"]["reserved"] == 512
    assert inventory["MEMORY_MB"]["allocation_ratio"] == 1.0
    assert inventory["DISK_GB"]["reserved"] == 0 and inventory["DISK_GB"]["total"] == 100


def test_ratios_and_reservations_override(conf: cfg.ConfigOpts) -> None:
    for name, value in (("cpu_allocation_ratio", 2.0), ("initial_ram_allocation_ratio", 1.5),
                        ("reserved_host_cpus", 2), ("reserved_host_disk_mb", 1025)):
        conf.set_override(name, value)
    inventory = resources.inventory(conf, HostSize(vcpus=8, memory_mb=4096, disk_gb=100))
    assert (inventory["VCPU"]["allocation_ratio"], inventory["VCPU"]["reserved"]) == (2.0, 2)
    assert inventory["MEMORY_MB"]["allocation_ratio"] == 1.5
    assert inventory["DISK_GB"]["reserved"] == 2  # 1025 MiB rounds up to 2 GiB


def test_reserved_is_capped_at_total_and_empty_classes_are_left_out(
    conf: cfg.ConfigOpts,
) -> None:
    inventory = resources.inventory(conf, HostSize(vcpus=2, memory_mb=256, disk_gb=0))
    assert inventory["MEMORY_MB"]["reserved"] == 256
    assert "DISK_GB" not in inventory


def test_report_measures_this_host(conf: cfg.ConfigOpts) -> None:
    conf.set_override("custom_traits", ["CUSTOM_B", "CUSTOM_A", "CUSTOM_B"], group="compute")
    report = resources.report(conf)
    assert report["custom_traits"] == ["CUSTOM_A", "CUSTOM_B"]
    assert report["inventory"]["VCPU"]["total"] >= 1
    assert report["inventory"]["MEMORY_MB"]["total"] > 0


def test_custom_traits_must_be_custom(conf: cfg.ConfigOpts) -> None:
    with pytest.raises(ValueError):
        conf.set_override("custom_traits", ["HW_CPU_X86_AVX2"], group="compute")


def test_the_disk_is_measured_before_instances_path_exists(
    conf: cfg.ConfigOpts, tmp_path: pathlib.Path,
) -> None:
    conf.set_override("instances_path", str(tmp_path / "not" / "yet"))
    conf_now = resources.measure(conf)
    conf.set_override("instances_path", str(tmp_path))
    assert conf_now.disk_gb == resources.measure(conf).disk_gb


@pytest.mark.parametrize(("option", "rc", "initial"), [
    ("cpu_allocation_ratio", "VCPU", 4.0),
    ("ram_allocation_ratio", "MEMORY_MB", 1.0),
    ("disk_allocation_ratio", "DISK_GB", 1.0),
])
def test_a_zero_ratio_means_unset_as_in_nova(
    conf: cfg.ConfigOpts, option: str, rc: str, initial: float
) -> None:
    # Nova (nova/conf/compute.py): "If this option is set to something *other than* None or
    # 0.0, the allocation ratio will be overwritten by the value of this option". 0.0 was the
    # default before Stein, so old nova.conf fragments carry it: taken as 0 the host would
    # have no capacity in Placement.
    conf.set_override(option, 0.0)
    inventory = resources.inventory(conf, HostSize(vcpus=8, memory_mb=16384, disk_gb=100))
    record = inventory[rc]
    capacity = (record["total"] - record["reserved"]) * record["allocation_ratio"]
    assert record["allocation_ratio"] == initial, (
        f"{option} = 0.0 gives Placement capacity {capacity}")
