"""Seed 002's experiment with the unmodified client: an aggregate ``Trove`` holding compute3
with ``image_isolation_property=tesora_edition``; three images tagged ``tesora_edition``, three
not; six ``openstack --os-compute-api-version 2.81 server create --flavor F --image I
--nic none --wait``. With the stack's filters (AggregateImageStrictIsolation among them)
the tagged ones all land on compute3 and the untagged ones never do; with the strict filter
swapped for AggregateImagePropertiesIsolation, the one-way leak shows: an untagged image lands
on compute3. A rebuild cannot bring an image the isolation keeps out onto compute3."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.boot import (
    BUILD_TIMEOUT,
    MICROVERSION,
    Images,
    Servers,
    eventually,
    flavor,
    host_of,
)
from tests.integration.conftest import Stack

pytestmark = pytest.mark.integration

TAG = "tesora_edition"
#: The leak's conductor: Nova's one-way filter instead of the strict one, and the extra-specs
#: filter, through which a flavor asks for compute3 alone.
ONE_WAY = ("[filter_scheduler]\nenabled_filters = ComputeFilter,"
           "AggregateImagePropertiesIsolation,AggregateInstanceExtraSpecsFilter\n")


@pytest.fixture
def images(stack: Stack) -> Iterator[Images]:
    made = Images(stack)
    yield made
    made.purge()


@pytest.fixture
def servers(stack: Stack) -> Iterator[Servers]:
    made = Servers(stack)
    yield made
    made.purge()


def test_strict_isolation_both_ways(stack: Stack, images: Images, servers: Servers,
                                    make_aggregate: Any) -> None:
    make_aggregate(hosts=("compute3",), metadata={"image_isolation_property": TAG})
    tagged = [images("raw", **{TAG: "enterprise"}) for _ in range(3)]
    untagged = [images("raw") for _ in range(3)]
    with flavor(stack) as name:
        tagged_hosts = [host_of(servers.create(name, image, check=True)) for image in tagged]
        untagged_hosts = [host_of(servers.create(name, image, check=True))
                          for image in untagged]
    assert tagged_hosts == ["compute3"] * 3
    assert "compute3" not in untagged_hosts and None not in untagged_hosts, untagged_hosts
    log = stack.log_file("conductor").read_text()
    assert "AggregateImageStrictIsolation: host compute" in log


def test_the_one_way_filter_leaks_untagged_images_into_the_aggregate(
        stack: Stack, images: Images, servers: Servers, make_aggregate: Any) -> None:
    make_aggregate(hosts=("compute3",), metadata={TAG: "enterprise", "trove": "true"})
    untagged = images("raw")
    to_compute3 = {"aggregate_instance_extra_specs:trove": "true"}
    with flavor(stack, extra_specs=to_compute3) as name:
        with stack.conductor_options("one-way", ONE_WAY):
            leaked = servers.create(name, untagged, check=True)
        assert host_of(leaked) == "compute3"
        # The stack's own filters keep the untagged image out of the isolated host.
        make_aggregate(hosts=("compute3",), metadata={"image_isolation_property": TAG})
        refused = servers.create(name, untagged)
    assert refused["status"] == "ERROR"
    assert refused["fault"]["message"].startswith("No valid host was found.")


def test_a_rebuild_cannot_bring_an_image_the_isolation_keeps_out_onto_the_host(
        stack: Stack, images: Images, servers: Servers, make_aggregate: Any) -> None:
    # Nova bug 1664931 (OSSA-2017-005): a rebuild was checked as a forced host, so no host
    # filter judged the new image. The stack enables AggregateImagePropertiesIsolation.
    make_aggregate(hosts=("compute3",), metadata={TAG: "enterprise"})
    enterprise = images("raw", **{TAG: "enterprise"})
    with flavor(stack) as name:
        server = servers.create(name, enterprise, "--availability-zone", ":compute3",
                                check=True)
        assert host_of(server) == "compute3"
        stack.run_openstack(*MICROVERSION, "server", "rebuild", "--image",
                            images("raw", **{TAG: "community"}), server["id"], check=False)
        shown = eventually(
            lambda: (s := servers.show(server["id"]))["status"] != "REBUILD" and s,
            BUILD_TIMEOUT, "the rebuild to end")
    assert shown["status"] == "ERROR", shown
    assert shown["fault"]["message"].startswith("No valid host was found.")
    assert "AggregateImagePropertiesIsolation" in shown["fault"].get("details", "")
    disk = servers.record(server["id"])["disk"]
    assert disk is not None and disk["image_id"] == enterprise  # the old disk stays
