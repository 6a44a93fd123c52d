"""The request filters build one Placement query: resources, image type trait (seed 000),
traits of flavor and image, availability zone, strict isolation and isolated aggregates pushed
down as member_of, the limit."""

from __future__ import annotations

import logging

import pytest
from oslo_config import cfg

from fleetcache.conductor.placement.provider import provider_uuid
from fleetcache.conductor.scheduler import request_filters as rf
from fleetcache.conductor.scheduler.aggregates import AggregateCatalog
from fleetcache.conductor.scheduler.query import CandidateQuery
from tests.unit.conductor.scheduler.helpers import spec

A, B, C = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002", \
    "cccccccc-0000-4000-8000-000000000003"


def build(conf: cfg.ConfigOpts, s: object, metadata: dict[str, dict[str, str]] | None = None
          ) -> CandidateQuery:
    return rf.build_query(rf.get_request_filters(conf), s,  # type: ignore[arg-type]
                          AggregateCatalog(metadata or {}), conf.scheduler.max_placement_results)


def test_resources_from_flavor_and_limit(conf: cfg.ConfigOpts) -> None:
    q = build(conf, spec())
    assert q.resources == {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
    assert ("resources", "DISK_GB:1,MEMORY_MB:512,VCPU:1") in q.params()
    assert ("limit", "1000") in q.params()


def test_zero_disk_and_resource_overrides(conf: cfg.ConfigOpts) -> None:
    q = build(conf, spec(extra_specs={"resources:DISK_GB": "0", "resources:VCPU": "4",
                                      "resources:CUSTOM_GPU": "1", "resources:X": "many"}))
    assert q.resources == {"VCPU": 4, "MEMORY_MB": 512, "CUSTOM_GPU": 1}


def test_image_type_trait_required_by_default(conf: cfg.ConfigOpts) -> None:
    q = build(conf, spec({"id": "i", "disk_format": "qcow2"}))
    assert q.required == {"COMPUTE_IMAGE_TYPE_QCOW2"}
    assert ("required", "COMPUTE_IMAGE_TYPE_QCOW2") in q.params()


def test_image_type_filter_disabled(conf: cfg.ConfigOpts) -> None:
    conf.set_override("filter_hosts_by_image_type_support", False, group="scheduler")
    assert build(conf, spec({"id": "i", "disk_format": "qcow2"})).required == set()


def test_nova_option_name_is_a_deprecated_alias(tmp_path: object) -> None:
    from fleetcache.common import config
    path = f"{tmp_path}/f.conf"
    with open(path, "w") as f:
        f.write("[scheduler]\nquery_placement_for_image_type_support = false\n")
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([], project="fleetcache", default_config_files=[path])
    assert conf.scheduler.filter_hosts_by_image_type_support is False


def test_unknown_disk_format_does_not_filter_and_logs(
    conf: cfg.ConfigOpts, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        q = build(conf, spec({"id": "i", "disk_format": "weird"}))
    assert q.required == set()
    assert "has no image type trait" in caplog.text


def test_traits_from_flavor_and_image(conf: cfg.ConfigOpts) -> None:
    s = spec({"id": "i", "disk_format": "raw", "trait:CUSTOM_IMG": "required"},
             extra_specs={"trait:CUSTOM_A": "required", "trait:CUSTOM_B": "forbidden",
                          "trait:CUSTOM_C": "nonsense"})
    q = build(conf, s)
    assert q.required == {"COMPUTE_IMAGE_TYPE_RAW", "CUSTOM_A", "CUSTOM_IMG"}
    assert q.forbidden == {"CUSTOM_B"}
    assert ("required", "COMPUTE_IMAGE_TYPE_RAW,CUSTOM_A,CUSTOM_IMG,!CUSTOM_B") in q.params()


def test_availability_zone_pushed_down(conf: cfg.ConfigOpts) -> None:
    md = {A: {"availability_zone": "az1"}, B: {"availability_zone": "az1"},
          C: {"availability_zone": "az2"}}
    q = build(conf, spec(availability_zone="az1"), md)
    assert q.member_of == [frozenset({A, B})]
    # the default zone: hosts in no other zone's aggregate
    q = build(conf, spec(availability_zone="nova"), md)
    assert q.member_of == [] and q.not_member_of == {A, B, C}
    # a zone no aggregate has matches nothing, without asking Placement
    assert build(conf, spec(availability_zone="az9"), md).impossible


def test_strict_isolation_pushed_down_both_ways(conf: cfg.ConfigOpts) -> None:
    md = {A: {"image_isolation_property": "tesora_edition"},
          B: {"image_isolation_property": "tesora_edition, sahara"},
          C: {"image_isolation_property": "gpu"}}
    tagged = build(conf, spec({"id": "i", "disk_format": "raw", "tesora_edition": "e"}), md)
    assert tagged.member_of == [frozenset({A, B})]
    assert tagged.not_member_of == {C}
    assert ("member_of", f"in:{A},{B}") in tagged.params()
    assert ("member_of", f"!in:{C}") in tagged.params()
    untagged = build(conf, spec({"id": "i", "disk_format": "raw"}), md)
    assert untagged.member_of == [] and untagged.not_member_of == {A, B, C}


def test_strict_isolation_not_pushed_down_when_its_filter_is_off(conf: cfg.ConfigOpts) -> None:
    conf.set_override("enabled_filters", ["ComputeFilter"], group="filter_scheduler")
    md = {A: {"image_isolation_property": "tesora_edition"}}
    q = build(conf, spec({"id": "i", "disk_format": "raw"}), md)
    assert q.not_member_of == set()


def test_isolated_trait_aggregates(conf: cfg.ConfigOpts) -> None:
    md = {A: {"trait:CUSTOM_TROVE": "required"},
          B: {"trait:CUSTOM_TROVE": "required", "trait:CUSTOM_SSD": "required"},
          C: {"trait:CUSTOM_X": "forbidden"}}
    assert build(conf, spec(), md).not_member_of == set()  # option off by default
    conf.set_override("enable_isolated_aggregate_filtering", True, group="scheduler")
    assert build(conf, spec(), md).not_member_of == {A, B}
    q = build(conf, spec(extra_specs={"trait:CUSTOM_TROVE": "required"}), md)
    assert q.not_member_of == {B}
    q = build(conf, spec({"id": "i", "disk_format": "raw", "trait:CUSTOM_TROVE": "required",
                          "trait:CUSTOM_SSD": "required"}), md)
    assert q.not_member_of == set()


def test_forced_host_is_in_tree(conf: cfg.ConfigOpts) -> None:
    q = build(conf, spec(force_host="compute3"))
    assert ("in_tree", provider_uuid("compute3")) in q.params()


def test_requested_destination_is_in_tree(conf: cfg.ConfigOpts) -> None:
    q = build(conf, spec(requested_destination="compute3", claim=False))
    assert ("in_tree", provider_uuid("compute3")) in q.params()


def test_without_pushdown_keeps_only_resources_and_limit(conf: cfg.ConfigOpts) -> None:
    md = {A: {"image_isolation_property": "p"}}
    q = build(conf, spec({"id": "i", "disk_format": "raw"}), md).without_pushdown()
    assert [name for name, _ in q.params()] == ["resources", "limit"]
