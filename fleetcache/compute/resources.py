"""What this compute offers for Placement: its measured inventory and its operator traits.

The compute measures its host (CPU count, physical memory, the size of the file system under
``[DEFAULT] instances_path``) and applies the ``[DEFAULT]`` reserved and allocation-ratio
options, so the conductor writes the inventory as given (``fleetcache.conductor.placement``).
Both travel in the capabilities the compute sends when it registers, under the keys
:mod:`fleetcache.compute.rpcapi` names.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from typing import Any

from oslo_config import cfg

from fleetcache.compute.rpcapi import CUSTOM_TRAITS_CAPABILITY, INVENTORY_CAPABILITY

MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclasses.dataclass(frozen=True)
class HostSize:
    """The host as measured: CPUs, MiB of memory, GiB of disk under ``instances_path``."""

    vcpus: int
    memory_mb: int
    disk_gb: int


def measure(conf: cfg.ConfigOpts) -> HostSize:
    """Measure this host (``os.cpu_count``, ``sysconf`` pages, ``shutil.disk_usage``); the disk
    is the file system ``instances_path`` is (or will be) on: a driver without disks never
    creates that directory."""
    vcpus = os.cpu_count() or 1
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // MIB
    path = os.path.abspath(conf.instances_path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    disk_gb = shutil.disk_usage(path).total // GIB
    return HostSize(vcpus=vcpus, memory_mb=memory_mb, disk_gb=disk_gb)


def inventory(conf: cfg.ConfigOpts, size: HostSize) -> dict[str, dict[str, Any]]:
    """Placement inventories (``PUT /resource_providers/{uuid}/inventories`` records) of a
    host of ``size`` under this configuration. Reserved never exceeds total, and a class the
    host has none of is left out (Placement refuses both)."""

    def record(total: int, reserved: int, ratio: float | None, initial: float) -> dict[str, Any]:
        return {
            "total": total,
            "reserved": min(reserved, total),
            "min_unit": 1,
            "max_unit": max(total, 1),
            "step_size": 1,
            "allocation_ratio": _ratio(ratio, initial),
        }

    records = {
        "VCPU": record(size.vcpus, conf.reserved_host_cpus, conf.cpu_allocation_ratio,
                       conf.initial_cpu_allocation_ratio),
        "MEMORY_MB": record(size.memory_mb, conf.reserved_host_memory_mb,
                            conf.ram_allocation_ratio, conf.initial_ram_allocation_ratio),
        "DISK_GB": record(size.disk_gb, math.ceil(conf.reserved_host_disk_mb / 1024),
                          conf.disk_allocation_ratio, conf.initial_disk_allocation_ratio),
    }
    return {rc: rec for rc, rec in records.items() if rec["total"] >= 1}


def _ratio(configured: float | None, initial: float) -> float:
    """``configured``, or ``initial`` when it is unset or 0.0: Nova reads 0.0 as unset too
    ("set to something other than None or 0.0", nova/conf/compute.py), since 0.0 was the
    options' default before Stein and old nova.conf fragments still carry it. Taken at its
    word it would give the host no capacity at all."""
    return float(configured if configured else initial)


def report(conf: cfg.ConfigOpts, size: HostSize | None = None) -> dict[str, Any]:
    """The capabilities to add to the driver's at registration: inventory and custom traits.

    :param size: the host's size; measured when not given.
    """
    return {
        INVENTORY_CAPABILITY: inventory(conf, size or measure(conf)),
        CUSTOM_TRAITS_CAPABILITY: sorted(set(conf.compute.custom_traits)),
    }
