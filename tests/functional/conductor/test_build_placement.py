"""The boot path (fleetcache.conductor.build) with the real scheduler and a real Placement (in
process), computes and images faked: a rebuild is checked on its own host by the host filters
that judge the image, not those that judge the host, and keeps its claim (Nova bug 1664931,
OSSA-2017-005, for the hole when it was checked as a forced host: no filter at all)."""

from __future__ import annotations

import uuid
from typing import Any

from oslo_config import cfg

from fleetcache.common import binaries
from fleetcache.common.context import RequestContext
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db import services as db_services
from fleetcache.common.db.instances import InstanceCreate
from fleetcache.common.db.session import Database
from fleetcache.conductor.build import InstanceBuilder
from fleetcache.conductor.placement import PlacementClient, provider_uuid
from fleetcache.conductor.scheduler import Scheduler
from fleetcache.image.source import ImageMeta
from tests.functional.conductor.test_scheduler import (  # noqa: F401 - the fixtures
    Cloud,
    cloud,
    db,
    enable,
)

CTXT = RequestContext(project_id="p1", user_id="u1")
FLAVOR = {"flavorid": "small", "name": "small", "vcpus": 1, "memory_mb": 512, "root_gb": 1,
          "ephemeral_gb": 0, "swap": 0, "description": None, "extra_specs": {}}


class Images:
    """Raw images by id, each with its ``tesora_edition``."""

    def __init__(self, **editions: str) -> None:
        self.by_id = {image_id: ImageMeta(id=image_id, disk_format="raw",
                                          container_format="bare", size=1,
                                          properties={"tesora_edition": edition})
                      for edition, image_id in editions.items()}

    def show(self, ctxt: Any, image_id: str) -> ImageMeta:
        return self.by_id[image_id]


class Computes:
    """Every compute: the disks made, as ``{uuid: (host, image)}``."""

    def __init__(self) -> None:
        self.disks: dict[str, tuple[str, str]] = {}

    def compute_api(self, cell: Any) -> Computes:
        return self

    def create_instance_disk(self, ctxt: Any, host: str, instance_uuid: str, image_id: str,
                             size: int | None = None) -> dict[str, Any]:
        self.disks[instance_uuid] = (host, image_id)
        return {"backend": "raw", "base": "/b", "image_fetched": False}

    def delete_instance_disk(self, ctxt: Any, host: str, instance_uuid: str) -> bool:
        return self.disks.pop(instance_uuid, None) is not None


def _instance(database: Database, image_id: str) -> str:
    record = InstanceCreate(
        uuid=str(uuid.uuid4()), project_id="p1", user_id="u1", display_name="vm",
        image_ref=image_id, flavor=dict(FLAVOR), reservation_id="r-1", launch_index=0,
        availability_zone=None, requested_host=None)
    (created,) = db_instances.instances_create(database, [record])
    return created["uuid"]


def _rebuild(builder: InstanceBuilder, instance_uuid: str, image_id: str) -> None:
    db_instances.instance_update(builder.db, instance_uuid,
                                 {"task_state": "rebuilding", "image_ref": image_id})
    builder.rebuild(CTXT, instance_uuid)


def test_a_rebuild_is_refused_an_image_the_hosts_aggregate_isolates_out(
    placement_conf: cfg.ConfigOpts, db: Database, cloud: Cloud,  # noqa: F811
    placement_client: PlacementClient,
) -> None:
    enable(placement_conf, "ComputeFilter", "AggregateImagePropertiesIsolation")
    host = cloud.compute("compute-ee")
    cloud.aggregate([host], {"tesora_edition": "ee"})
    ee_id, ce_id = str(uuid.uuid4()), str(uuid.uuid4())
    images, computes = Images(ee=ee_id, ce=ce_id), Computes()
    builder = InstanceBuilder(placement_conf, db, computes,  # type: ignore[arg-type]
                              Scheduler(placement_conf, db, placement_client),
                              images=lambda: images)  # type: ignore[arg-type,return-value]
    instance_uuid = _instance(db, ee_id)
    builder.build(CTXT, [instance_uuid])
    assert computes.disks == {instance_uuid: (host, ee_id)}
    held = placement_client.get_allocations(instance_uuid)
    assert list(held) == [provider_uuid(host)]
    # Disabled for maintenance: no new instances, but its own are still rebuilt (ComputeFilter
    # does not judge a rebuild, as Nova's errata to OSSA-2017-005).
    db_services.service_update(db, db_services.service_get(db, host, binaries.COMPUTE)["id"],
                               disabled=True, disabled_reason="maintenance")

    _rebuild(builder, instance_uuid, ce_id)

    instance = db_instances.instance_get(db, instance_uuid)
    assert instance["vm_state"] == "error", "rebuilt past AggregateImagePropertiesIsolation"
    assert (instance["fault_message"] or "").startswith("No valid host was found.")
    assert "AggregateImagePropertiesIsolation: 1 -> 0" in (instance["fault_details"] or "")
    assert computes.disks == {instance_uuid: (host, ee_id)}  # the old disk stays
    assert placement_client.get_allocations(instance_uuid) == held

    # An image the filters let onto the host rebuilds there, with the same claim.
    _rebuild(builder, instance_uuid, ee_id)
    assert db_instances.instance_get(db, instance_uuid)["vm_state"] == "active"
    assert placement_client.get_allocations(instance_uuid) == held
    builder.delete(CTXT, instance_uuid)
    assert not placement_client.get_allocations(instance_uuid)
