"""Host filters come from [filter_scheduler] available_filters (class paths, or a function
returning classes; the default finds fleetcache's through stevedore) and enabled_filters (class
names); an unknown name fails start-up with one line naming the known ones."""

from __future__ import annotations

import pytest
from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.conductor.scheduler.filters import all_filters, load_filters
from fleetcache.conductor.scheduler.filters.base import BaseHostFilter

BUILTIN = {"ComputeFilter", "AvailabilityZoneFilter", "AggregateImagePropertiesIsolation",
           "AggregateInstanceExtraSpecsFilter", "AggregateImageStrictIsolation"}


class MyFilter(BaseHostFilter):
    def host_fails(self, host: object, request: object) -> str | None:
        return None


def test_all_filters_through_entry_points() -> None:
    assert {cls.__name__ for cls in all_filters()} == BUILTIN


def test_default_enabled_filters(conf: cfg.ConfigOpts) -> None:
    assert [f.name for f in load_filters(conf)] == [
        "ComputeFilter", "AvailabilityZoneFilter", "AggregateImageStrictIsolation"]


def test_enabled_order_is_kept(conf: cfg.ConfigOpts) -> None:
    names = ["AggregateImageStrictIsolation", "AggregateInstanceExtraSpecsFilter",
             "ComputeFilter", "AggregateImagePropertiesIsolation"]
    conf.set_override("enabled_filters", names, group="filter_scheduler")
    assert [f.name for f in load_filters(conf)] == names


def test_unknown_filter_names_the_known_ones(conf: cfg.ConfigOpts) -> None:
    conf.set_override("enabled_filters", ["ComputeFilter", "RamFilter"],
                      group="filter_scheduler")
    with pytest.raises(exception.InvalidConfiguration) as caught:
        load_filters(conf)
    message = str(caught.value)
    assert "RamFilter" in message and "\n" not in message
    assert all(name in message for name in BUILTIN)


def test_a_class_path_adds_a_filter(conf: cfg.ConfigOpts) -> None:
    conf.set_override("available_filters", [
        "fleetcache.conductor.scheduler.filters.all_filters",
        f"{__name__}.MyFilter"], group="filter_scheduler")
    conf.set_override("enabled_filters", ["MyFilter", "ComputeFilter"],
                      group="filter_scheduler")
    assert [f.name for f in load_filters(conf)] == ["MyFilter", "ComputeFilter"]


def test_bad_class_path_fails(conf: cfg.ConfigOpts) -> None:
    conf.set_override("available_filters", ["no.such.Filter"], group="filter_scheduler")
    with pytest.raises(exception.InvalidConfiguration, match="cannot import no.such.Filter"):
        load_filters(conf)
    conf.set_override("available_filters", ["fleetcache.common.exception.NoValidHost"],
                      group="filter_scheduler")
    with pytest.raises(exception.InvalidConfiguration, match="not a BaseHostFilter"):
        load_filters(conf)
