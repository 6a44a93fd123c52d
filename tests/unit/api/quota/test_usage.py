"""What a server takes and what a project uses, by unified limit name."""

from __future__ import annotations

from fleetcache.api.quota import usage
from fleetcache.common.flavor_resources import resource_amounts

SMALL = {"vcpus": 1, "memory_mb": 512, "root_gb": 1, "extra_specs": {}}


def test_a_server_takes_its_flavors_classes() -> None:
    assert usage.per_server(SMALL) == {"class:VCPU": 1, "class:MEMORY_MB": 512,
                                       "class:DISK_GB": 1}


def test_resources_extra_specs_override_drop_and_add_classes_as_the_scheduler_claims() -> None:
    flavor = {**SMALL, "extra_specs": {"resources:DISK_GB": "0", "resources:VGPU": "2",
                                       "resources:VCPU": "nonsense", "hw:cpu_policy": "x"}}
    assert usage.per_server(flavor) == {"class:VCPU": 1, "class:MEMORY_MB": 512,
                                        "class:VGPU": 2}
    assert resource_amounts(1, 512, 1, flavor["extra_specs"]) == {
        "VCPU": 1, "MEMORY_MB": 512, "VGPU": 2}


def test_deltas_always_name_servers_and_the_classes_taken() -> None:
    assert usage.deltas({"class:VCPU": 2}, 3) == {"servers": 3, "class:VCPU": 6}
    assert usage.deltas({}, 0) == {"servers": 0}


def test_total_adds_every_server_up() -> None:
    flavor_disk0 = {**SMALL, "root_gb": 0}
    assert usage.total([SMALL, SMALL, flavor_disk0]) == {
        "servers": 3, "class:VCPU": 3, "class:MEMORY_MB": 1536, "class:DISK_GB": 2}
    assert usage.total([]) == {"servers": 0}
