"""The scheduler against a real Placement (openstack-placement's WSGI app on SQLite, in
process): the image-type trait keeps qcow2 off a host without COMPUTE_IMAGE_TYPE_QCOW2, strict
isolation holds both ways, AggregateImagePropertiesIsolation's one-way leak shows, a rebuild's
host is checked by the host filters, and N concurrent requests for M slots give exactly M
claims, matching Placement's usages."""

from __future__ import annotations

import concurrent.futures
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.common import binaries, exception
from fleetcache.common.context import get_admin_context
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import migration
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from fleetcache.conductor.placement import PlacementClient, ProviderSync, provider_uuid
from fleetcache.conductor.scheduler import FlavorSpec, RequestSpec, Scheduler
from tests.functional.conftest import unique_host

CTXT = get_admin_context()
COMPUTE = binaries.COMPUTE
FLAVOR = FlavorSpec("small", vcpus=1, memory_mb=512, root_gb=1, extra_specs={})


def caps(qcow2: bool = True, vcpus: int = 8, ram: int = 8192) -> dict[str, Any]:
    def record(total: int) -> dict[str, Any]:
        return {"total": total, "reserved": 0, "min_unit": 1, "max_unit": total,
                "step_size": 1, "allocation_ratio": 1.0}
    return {"supports_image_type_raw": True, "supports_image_type_qcow2": qcow2,
            "inventory": {"VCPU": record(vcpus), "MEMORY_MB": record(ram),
                          "DISK_GB": record(100)}}


@pytest.fixture
def db(tmp_path: pathlib.Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path}/conductor.sqlite")
    migration.db_sync(database)
    yield database
    database.dispose()


class Cloud:
    """Computes registered in the database and Placement, and aggregates mirrored."""

    def __init__(self, db: Database, client: PlacementClient) -> None:
        self.db = db
        self.client = client
        self.sync = ProviderSync(client, 3)
        self.caps: dict[str, dict[str, Any]] = {}

    def compute(self, prefix: str, **kwargs: Any) -> str:
        host = unique_host(prefix)
        self.caps[host] = caps(**kwargs)
        db_services.service_register(self.db, host, COMPUTE, "compute", None, self.caps[host])
        self.sync.sync(host, self.caps[host], set())
        return host

    def aggregate(self, hosts: list[str], metadata: dict[str, str]) -> str:
        agg = db_aggregates.aggregate_create(self.db, f"agg-{uuid.uuid4().hex[:8]}")
        for host in hosts:
            db_aggregates.aggregate_add_host(self.db, agg["id"], host)
            self.sync.sync_aggregates(
                host, db_aggregates.aggregate_uuids_by_host(self.db, [host])[host])
        db_aggregates.aggregate_set_metadata(self.db, agg["id"], dict(metadata))
        return agg["uuid"]


@pytest.fixture
def cloud(db: Database, placement_client: PlacementClient) -> Cloud:
    return Cloud(db, placement_client)


def request(image: dict[str, Any], n: int = 1, **kwargs: Any) -> RequestSpec:
    return RequestSpec([str(uuid.uuid4()) for _ in range(n)], "project", "user", FLAVOR,
                       {"id": str(uuid.uuid4()), "container_format": "bare", **image}, **kwargs)


def placed(scheduler: Scheduler, spec: RequestSpec) -> list[str]:
    return [s.host for s in scheduler.select_destinations(CTXT, spec)]


def enable(conf: cfg.ConfigOpts, *filters: str) -> None:
    conf.set_override("enabled_filters", list(filters), group="filter_scheduler")


def test_image_type_trait_keeps_qcow2_off_a_host_without_it(
    placement_conf: cfg.ConfigOpts, db: Database, cloud: Cloud,
    placement_client: PlacementClient,
) -> None:
    raw_only = cloud.compute("rawonly", qcow2=False, ram=65536)  # the roomiest
    both = cloud.compute("both")
    assert "COMPUTE_IMAGE_TYPE_QCOW2" not in placement_client.get_traits(
        provider_uuid(raw_only))[1]
    scheduler = Scheduler(placement_conf, db, placement_client)

    assert set(placed(scheduler, request({"disk_format": "qcow2"}, n=4))) == {both}
    # a raw image may go to the roomier host, which the RAM weigher prefers
    assert placed(scheduler, request({"disk_format": "raw"})) == [raw_only]
    with pytest.raises(exception.NoValidHost):
        scheduler.select_destinations(CTXT, request({"disk_format": "vhd"}))


def test_strict_isolation_both_ways(
    placement_conf: cfg.ConfigOpts, db: Database, cloud: Cloud,
    placement_client: PlacementClient,
) -> None:
    enable(placement_conf, "ComputeFilter", "AggregateImageStrictIsolation")
    c1, c2 = cloud.compute("compute1"), cloud.compute("compute2")
    c3 = cloud.compute("compute3", ram=65536)  # roomiest: the weigher would pick it
    cloud.aggregate([c3], {"image_isolation_property": "tesora_edition"})
    scheduler = Scheduler(placement_conf, db, placement_client)

    tagged = placed(scheduler, request({"disk_format": "raw", "tesora_edition": "ee"}, n=3))
    untagged = placed(scheduler, request({"disk_format": "raw"}, n=3))

    assert tagged == [c3, c3, c3]
    assert c3 not in untagged and set(untagged) <= {c1, c2}


def test_strict_isolation_follows_metadata_without_restart(
    placement_conf: cfg.ConfigOpts, db: Database, cloud: Cloud,
    placement_client: PlacementClient,
) -> None:
    enable(placement_conf, "ComputeFilter", "AggregateImageStrictIsolation")
    cloud.compute("plain")
    isolated = cloud.compute("isolated", ram=65536)
    agg = cloud.aggregate([isolated], {})
    scheduler = Scheduler(placement_conf, db, placement_client)
    assert placed(scheduler, request({"disk_format": "raw"})) == [isolated]

    db_aggregates.aggregate_set_metadata(db, db_aggregates.aggregate_get_by_uuid(db, agg)["id"],
                                         {"image_isolation_property": "tesora_edition"})
    assert placed(scheduler, request({"disk_format": "raw"})) != [isolated]


def test_properties_isolation_leaks_untagged_images_one_way(
    placement_conf: cfg.ConfigOpts, db: Database, cloud: Cloud,
    placement_client: PlacementClient,
) -> None:
    enable(placement_conf, "ComputeFilter", "AggregateImagePropertiesIsolation")
    c1 = cloud.compute("compute1")
    c3 = cloud.compute("compute3", ram=65536)
    cloud.aggregate([c3], {"tesora_edition": "ee"})
    scheduler = Scheduler(placement_conf, db, placement_client)

    # an image with another edition is kept out ...
    assert placed(scheduler, request({"disk_format": "raw", "tesora_edition": "ce"})) == [c1]
    # ... the tagged one may go in, and so does an untagged image: the leak of seed 002
    assert placed(scheduler, request({"disk_format": "raw", "tesora_edition": "ee"})) == [c3]
    assert placed(scheduler, request({"disk_format": "raw"})) == [c3]


def test_a_rebuild_is_checked_by_the_host_filters_on_its_host(
    placement_conf: cfg.ConfigOpts, db: Database, cloud: Cloud,
    placement_client: PlacementClient,
) -> None:
    # Nova bug 1664931 (OSSA-2017-005): a rebuild must not skip the filters as a forced
    # host does, or a project member puts an image the isolation keeps out onto the host.
    enable(placement_conf, "ComputeFilter", "AggregateImagePropertiesIsolation")
    host = cloud.compute("compute-ee")
    cloud.aggregate([host], {"tesora_edition": "ee"})
    scheduler = Scheduler(placement_conf, db, placement_client)
    ce, ee = ({"disk_format": "raw", "tesora_edition": e} for e in ("ce", "ee"))

    rebuild = request(ce, requested_destination=host, claim=False)
    with pytest.raises(exception.NoValidHost) as caught:
        placed(scheduler, rebuild)
    assert caught.value.filter_summary[-1] == ("AggregateImagePropertiesIsolation", 1, 0)
    allowed = request(ee, requested_destination=host, claim=False)
    assert placed(scheduler, allowed) == [host]
    assert not placement_client.get_allocations(allowed.instance_uuids[0])  # nothing claimed
    # The admin's zone:host on a new build still skips them (Nova's force_hosts).
    forced = request(ce, force_host=host)
    assert placed(scheduler, forced) == [host]
    scheduler.release(forced.instance_uuids[0])


def test_concurrent_requests_for_the_last_slots_give_exactly_that_many_claims(
    placement_conf: cfg.ConfigOpts, db: Database, cloud: Cloud,
    placement_client: PlacementClient,
) -> None:
    slots, requests = 3, 8
    hosts = [cloud.compute("tiny", vcpus=1), cloud.compute("tiny", vcpus=1),
             cloud.compute("tiny", vcpus=1)]
    agg = cloud.aggregate(hosts, {"availability_zone": f"az-{uuid.uuid4().hex[:6]}"})
    zone = db_aggregates.aggregate_get_by_uuid(db, agg)["availability_zone"]
    scheduler = Scheduler(placement_conf, db, placement_client)
    specs = [request({"disk_format": "raw"}, availability_zone=zone) for _ in range(requests)]

    def attempt(spec: RequestSpec) -> str | None:
        try:
            return scheduler.select_destinations(CTXT, spec)[0].host
        except exception.NoValidHost:
            return None

    with concurrent.futures.ThreadPoolExecutor(max_workers=requests) as pool:
        results = list(pool.map(attempt, specs))

    winners = [r for r in results if r is not None]
    assert len(winners) == slots and sorted(winners) == sorted(hosts)
    for host in hosts:
        assert placement_client.get_usages(provider_uuid(host))["VCPU"] == 1
    for spec, result in zip(specs, results, strict=True):
        held = placement_client.get_allocations(spec.instance_uuids[0])
        assert bool(held) == (result is not None)

    for spec in specs:
        scheduler.release(spec.instance_uuids[0])
    assert all(placement_client.get_usages(provider_uuid(h))["VCPU"] == 0 for h in hosts)


def test_a_multi_instance_request_that_cannot_fit_claims_nothing(
    placement_conf: cfg.ConfigOpts, db: Database, cloud: Cloud,
    placement_client: PlacementClient,
) -> None:
    host = cloud.compute("pair", vcpus=2)
    agg = cloud.aggregate([host], {"availability_zone": f"az-{uuid.uuid4().hex[:6]}"})
    zone = db_aggregates.aggregate_get_by_uuid(db, agg)["availability_zone"]
    scheduler = Scheduler(placement_conf, db, placement_client)
    spec = request({"disk_format": "raw"}, n=3, availability_zone=zone, min_count=3)

    with pytest.raises(exception.NoValidHost):
        scheduler.select_destinations(CTXT, spec)

    assert placement_client.get_usages(provider_uuid(host)).get("VCPU", 0) == 0
    assert all(not placement_client.get_allocations(u) for u in spec.instance_uuids)


def test_precache_targeting_names_hosts_lacking_the_format_trait(
    db: Database, cloud: Cloud, placement_client: PlacementClient,
) -> None:
    from fleetcache.conductor.scheduler.image_support import ImageTypeSupport

    raw_only, both = cloud.compute("rawonly", qcow2=False), cloud.compute("both")
    outside = cloud.compute("outside", qcow2=False)
    agg = cloud.aggregate([raw_only, both], {})
    images = {"q": {"disk_format": "qcow2"}, "r": {"disk_format": "raw"}}

    result = ImageTypeSupport(placement_client).unsupported(
        agg, [raw_only, both, outside], images)

    assert result == {raw_only: {"q": "host lacks trait COMPUTE_IMAGE_TYPE_QCOW2"}}
