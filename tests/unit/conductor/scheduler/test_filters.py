"""Each host filter against Nova's documented semantics (nova/doc/source/admin/scheduling.rst
and Nova's filter tests), and the strict isolation filter against its two-way rule."""

from __future__ import annotations

import pytest
from oslo_config import cfg

from fleetcache.conductor.scheduler.aggregates import AggregateCatalog
from fleetcache.conductor.scheduler.filters.aggregate_image_properties_isolation import (
    AggregateImagePropertiesIsolation,
)
from fleetcache.conductor.scheduler.filters.aggregate_image_strict_isolation import (
    AggregateImageStrictIsolation,
)
from fleetcache.conductor.scheduler.filters.aggregate_instance_extra_specs import (
    AggregateInstanceExtraSpecsFilter,
)
from fleetcache.conductor.scheduler.filters.availability_zone import AvailabilityZoneFilter
from fleetcache.conductor.scheduler.filters.compute import ComputeFilter
from tests.unit.conductor.scheduler.helpers import host, request, service, spec

A, B, C = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002", \
    "cccccccc-0000-4000-8000-000000000003"


def passes(host_filter: object, h: object, req: object) -> bool:
    return host_filter.host_fails(h, req) is None  # type: ignore[attr-defined]


# -- ComputeFilter --------------------------------------------------------------------------

def test_compute_filter_up_enabled_passes(conf: cfg.ConfigOpts) -> None:
    assert passes(ComputeFilter(conf), host("h"), request(spec()))


@pytest.mark.parametrize(("svc", "reason"), [
    (service("h", up=False), "down"), (service("h", disabled=True), "disabled")])
def test_compute_filter_down_or_disabled_fails(conf: cfg.ConfigOpts, svc: object,
                                               reason: str) -> None:
    fails = ComputeFilter(conf).host_fails(host("h", svc=svc), request(spec()))  # type: ignore[arg-type]
    assert fails is not None and reason in fails


def test_compute_filter_host_without_service_fails(conf: cfg.ConfigOpts) -> None:
    h = host("h")
    h.service = None
    assert not passes(ComputeFilter(conf), h, request(spec()))


# -- AvailabilityZoneFilter -----------------------------------------------------------------

def test_az_filter(conf: cfg.ConfigOpts) -> None:
    catalog = AggregateCatalog({A: {"availability_zone": "az1"}})
    f = AvailabilityZoneFilter(conf)
    in_az1 = host("h1", {A}, catalog)
    nowhere = host("h2", set(), catalog)
    assert passes(f, in_az1, request(spec(availability_zone="az1"), catalog))
    assert not passes(f, nowhere, request(spec(availability_zone="az1"), catalog))
    # a host in no zone aggregate is in [DEFAULT] default_availability_zone ("nova")
    assert passes(f, nowhere, request(spec(availability_zone="nova"), catalog))
    assert not passes(f, in_az1, request(spec(availability_zone="nova"), catalog))
    # no zone asked: everything passes
    assert passes(f, in_az1, request(spec(), catalog))


# -- AggregateImagePropertiesIsolation ------------------------------------------------------

def aipi(conf: cfg.ConfigOpts, metadata: dict[str, str], image_props: dict[str, str],
         in_aggregate: bool = True) -> bool:
    catalog = AggregateCatalog({A: metadata})
    image = {"id": "i", "disk_format": "raw", **image_props}
    h = host("h", {A} if in_aggregate else set(), catalog)
    return passes(AggregateImagePropertiesIsolation(conf), h, request(spec(image), catalog))


def test_aipi_matching_property_passes(conf: cfg.ConfigOpts) -> None:
    assert aipi(conf, {"hw_vm_mode": "hvm"}, {"hw_vm_mode": "hvm"})


def test_aipi_different_property_fails(conf: cfg.ConfigOpts) -> None:
    assert not aipi(conf, {"hw_vm_mode": "hvm"}, {"hw_vm_mode": "xen"})


def test_aipi_one_way_gap_image_without_the_property_passes(conf: cfg.ConfigOpts) -> None:
    """Nova bug 1677217: the isolated aggregate also takes images that do not say."""
    assert aipi(conf, {"trove": "true"}, {})


def test_aipi_comma_separated_metadata_is_any_of(conf: cfg.ConfigOpts) -> None:
    assert aipi(conf, {"os_distro": "ubuntu, centos"}, {"os_distro": "centos"})
    assert not aipi(conf, {"os_distro": "ubuntu, centos"}, {"os_distro": "debian"})
    # Nova splits on commas: the whole "ubuntu,centos" is not a value
    assert not aipi(conf, {"os_distro": "ubuntu,centos"}, {"os_distro": "ubuntu,centos"})


def test_aipi_multiple_properties_all_must_match(conf: cfg.ConfigOpts) -> None:
    md = {"os_distro": "ubuntu", "hw_vm_mode": "hvm"}
    assert aipi(conf, md, {"os_distro": "ubuntu", "hw_vm_mode": "hvm"})
    assert not aipi(conf, md, {"os_distro": "ubuntu", "hw_vm_mode": "xen"})


def test_aipi_host_in_no_aggregate_passes(conf: cfg.ConfigOpts) -> None:
    assert aipi(conf, {"trove": "true"}, {"trove": "false"}, in_aggregate=False)


def test_aipi_union_over_aggregates(conf: cfg.ConfigOpts) -> None:
    catalog = AggregateCatalog({A: {"os_distro": "ubuntu"}, B: {"os_distro": "centos"}})
    h = host("h", {A, B}, catalog)
    image = {"id": "i", "disk_format": "raw", "os_distro": "centos"}
    assert passes(AggregateImagePropertiesIsolation(conf), h, request(spec(image), catalog))


def test_aipi_namespace_and_separator(conf: cfg.ConfigOpts) -> None:
    conf.set_override("aggregate_image_properties_isolation_namespace", "hw",
                      group="filter_scheduler")
    conf.set_override("aggregate_image_properties_isolation_separator", "_",
                      group="filter_scheduler")
    md = {"hw_vm_mode": "hvm", "os_distro": "ubuntu"}
    # os_distro is outside the namespace: not checked
    assert aipi(conf, md, {"hw_vm_mode": "hvm", "os_distro": "centos"})
    assert not aipi(conf, md, {"hw_vm_mode": "xen"})
    conf.set_override("aggregate_image_properties_isolation_separator", ".",
                      group="filter_scheduler")
    # "hw." matches no key: nothing checked
    assert aipi(conf, md, {"hw_vm_mode": "xen"})


def test_aipi_value_compared_as_string(conf: cfg.ConfigOpts) -> None:
    assert aipi(conf, {"hw_cpu_cores": "2"}, {"hw_cpu_cores": 2})  # type: ignore[dict-item]


# -- AggregateInstanceExtraSpecsFilter ------------------------------------------------------

def aies(conf: cfg.ConfigOpts, metadata: dict[str, str] | None,
         extra_specs: dict[str, str]) -> bool:
    catalog = AggregateCatalog({A: metadata} if metadata is not None else {})
    h = host("h", {A} if metadata is not None else set(), catalog)
    return passes(AggregateInstanceExtraSpecsFilter(conf), h,
                  request(spec(extra_specs=extra_specs), catalog))


def test_aies_no_extra_specs_passes(conf: cfg.ConfigOpts) -> None:
    assert aies(conf, None, {})
    assert aies(conf, {"ssd": "true"}, {})


def test_aies_scoped_and_unscoped_keys(conf: cfg.ConfigOpts) -> None:
    assert aies(conf, {"ssd": "true"}, {"aggregate_instance_extra_specs:ssd": "true"})
    assert aies(conf, {"ssd": "true"}, {"ssd": "true"})
    assert not aies(conf, {"ssd": "false"}, {"aggregate_instance_extra_specs:ssd": "true"})


def test_aies_other_scopes_are_skipped(conf: cfg.ConfigOpts) -> None:
    assert aies(conf, None, {"trait:CUSTOM_X": "required", "hw:cpu_policy": "dedicated",
                             "resources:VCPU": "2"})


def test_aies_missing_key_fails_and_no_aggregate_fails(conf: cfg.ConfigOpts) -> None:
    assert not aies(conf, {"ssd": "true"}, {"aggregate_instance_extra_specs:gpu": "1"})
    assert not aies(conf, None, {"aggregate_instance_extra_specs:ssd": "true"})


def test_aies_key_same_as_scope(conf: cfg.ConfigOpts) -> None:
    """Nova's test_aggregate_filter_passes_extra_specs_key_same_as_scope."""
    md = {"aggregate_instance_extra_specs": "1"}
    assert aies(conf, md, {"aggregate_instance_extra_specs": "1"})


def test_aies_comma_metadata_any_value_matches(conf: cfg.ConfigOpts) -> None:
    assert aies(conf, {"CPU": "Trove, Sahara"}, {"aggregate_instance_extra_specs:CPU": "Trove"})
    assert not aies(conf, {"CPU": "Trove, Sahara"},
                    {"aggregate_instance_extra_specs:CPU": "Nova"})


@pytest.mark.parametrize(("value", "req", "ok"), [
    ("4", ">= 2", True), ("1", ">= 2", False), ("gold", "<or> silver <or> gold", True),
    ("ssd-nvme", "<in> nvme", True), ("b", "s> a", True), ("b", "s< a", False),
])
def test_aies_operators(conf: cfg.ConfigOpts, value: str, req: str, ok: bool) -> None:
    assert aies(conf, {"k": value}, {"aggregate_instance_extra_specs:k": req}) is ok


# -- AggregateImageStrictIsolation ----------------------------------------------------------

TROVE = {A: {"image_isolation_property": "tesora_edition"}}


def strict(conf: cfg.ConfigOpts, metadata: dict[str, dict[str, str]], aggs: set[str],
           image_props: dict[str, str]) -> bool:
    catalog = AggregateCatalog(metadata)
    image = {"id": "i", "disk_format": "raw", **image_props}
    return passes(AggregateImageStrictIsolation(conf), host("h", aggs, catalog),
                  request(spec(image), catalog))


def test_strict_isolated_host_takes_tagged_image(conf: cfg.ConfigOpts) -> None:
    assert strict(conf, TROVE, {A}, {"tesora_edition": "enterprise"})


def test_strict_isolated_host_refuses_untagged_image(conf: cfg.ConfigOpts) -> None:
    """The direction AggregateImagePropertiesIsolation leaks."""
    assert not strict(conf, TROVE, {A}, {})
    assert not strict(conf, TROVE, {A}, {"tesora_edition": ""})


def test_strict_tagged_image_refused_outside_isolation_aggregates(conf: cfg.ConfigOpts) -> None:
    assert not strict(conf, TROVE, set(), {"tesora_edition": "enterprise"})
    assert not strict(conf, {**TROVE, B: {"ssd": "true"}}, {B}, {"tesora_edition": "x"})


def test_strict_untagged_image_fine_elsewhere(conf: cfg.ConfigOpts) -> None:
    assert strict(conf, TROVE, set(), {})
    assert strict(conf, {**TROVE, B: {"ssd": "true"}}, {B}, {"other": "y"})


def test_strict_no_isolation_aggregate_is_a_no_op(conf: cfg.ConfigOpts) -> None:
    assert strict(conf, {}, set(), {"tesora_edition": "x"})


def test_strict_multi_valued_property_list_is_any_of(conf: cfg.ConfigOpts) -> None:
    md = {A: {"image_isolation_property": "tesora_edition, sahara_plugin"}}
    assert strict(conf, md, {A}, {"sahara_plugin": "spark"})
    assert strict(conf, md, {A}, {"tesora_edition": "x"})
    assert not strict(conf, md, {A}, {"os_distro": "ubuntu"})
    assert not strict(conf, md, set(), {"sahara_plugin": "spark"})


def test_strict_host_in_two_isolation_aggregates_needs_both(conf: cfg.ConfigOpts) -> None:
    md = {A: {"image_isolation_property": "tesora_edition"},
          B: {"image_isolation_property": "gpu_driver"}}
    assert strict(conf, md, {A, B}, {"tesora_edition": "x", "gpu_driver": "y"})
    assert not strict(conf, md, {A, B}, {"tesora_edition": "x"})
    # an image carrying both isolating properties needs an aggregate for each
    assert not strict(conf, md, {A}, {"tesora_edition": "x", "gpu_driver": "y"})
