"""The boot path's flow (fleetcache.conductor.build) against a fake scheduler implementing the
contract (select_destinations / release) and fake compute clients, on a real SQLite database."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import oslo_messaging as messaging
import pytest
from oslo_config import cfg

from fleetcache.common import binaries, exception
from fleetcache.common.context import RequestContext
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db import models
from fleetcache.common.db import services as db_services
from fleetcache.common.db.instances import InstanceCreate
from fleetcache.common.db.session import Database
from fleetcache.conductor import build
from fleetcache.conductor.scheduler.spec import RequestSpec, Selection
from fleetcache.image.source import ImageMeta

CTXT = RequestContext(project_id="p1", user_id="u1")
IMAGE = ImageMeta(id="11111111-1111-4111-8111-111111111111", disk_format="raw", size=10,
                  properties={"tesora_edition": "ee"})
FLAVOR = {"flavorid": "m1", "name": "m1", "vcpus": 1, "memory_mb": 64, "root_gb": 1,
          "ephemeral_gb": 0, "swap": 0, "description": None,
          "extra_specs": {"trait:CUSTOM_X": "required"}}


class FakeScheduler:
    """Places instances on ``hosts`` in turn, one slot each (``slots``), or raises
    ``error``; claims and releases are recorded as Placement would hold them."""

    def __init__(self, hosts: Sequence[str], slots: int = 100) -> None:
        self.hosts = list(hosts)
        self.slots = slots
        self.error: Exception | None = None
        self.claims: dict[str, str] = {}
        self.specs: list[RequestSpec] = []
        self.released: list[str] = []

    def select_destinations(self, ctxt: RequestContext, spec: RequestSpec) -> list[Selection]:
        self.specs.append(spec)
        if self.error is not None:
            raise self.error
        free = self.slots - len(self.claims)
        only = spec.force_host or spec.requested_destination
        if free < spec.min_count or (only and only not in self.hosts):
            raise exception.NoValidHost(reason="There are not enough hosts available.",
                                        filter_summary=[["ComputeFilter", 3, 3],
                                                        ["AggregateImageStrictIsolation", 3,
                                                         0]])
        chosen = []
        for index, uuid in enumerate(spec.instance_uuids[:free]):
            host = only or self.hosts[index % len(self.hosts)]
            self.claims[uuid] = host
            chosen.append(Selection(instance_uuid=uuid, host=host, cell_id=None,
                                    provider_uuid=f"rp-{host}", allocation_request={}))
        return chosen

    def release(self, instance_uuid: str) -> None:
        self.released.append(instance_uuid)
        self.claims.pop(instance_uuid, None)

    def release_all(self, instance_uuids: list[str]) -> None:
        for instance_uuid in instance_uuids:
            self.release(instance_uuid)


class FakeCompute:
    """Every compute: disks by (host, uuid); ``fail`` maps a host to the error it raises."""

    def __init__(self) -> None:
        self.disks: dict[tuple[str, str], str] = {}
        self.fail: dict[str, Exception] = {}
        self.fail_delete: dict[str, Exception] = {}
        self.on_create: Any = None

    def compute_api(self, cell: Any) -> FakeCompute:
        return self

    def create_instance_disk(self, ctxt: Any, host: str, instance_uuid: str, image_id: str,
                             size: int | None = None) -> dict[str, Any]:
        if host in self.fail:
            raise self.fail[host]
        if self.on_create is not None:
            self.on_create(instance_uuid)
        self.disks[(host, instance_uuid)] = image_id
        return {"instance_uuid": instance_uuid, "image_id": image_id, "backend": "raw",
                "path": f"/i/{instance_uuid}/disk", "format": "raw", "base": "/b",
                "image_fetched": False, "size": size}

    def delete_instance_disk(self, ctxt: Any, host: str, instance_uuid: str) -> bool:
        if host in self.fail_delete:
            raise self.fail_delete[host]
        return self.disks.pop((host, instance_uuid), None) is not None


class FakeImages:
    def show(self, ctxt: Any, image_id: str) -> ImageMeta:
        if image_id != IMAGE.id:
            raise exception.ImageNotFound(image_id=image_id)
        return IMAGE


@pytest.fixture
def scheduler() -> FakeScheduler:
    return FakeScheduler(["c1", "c2", "c3"])


@pytest.fixture
def computes() -> FakeCompute:
    return FakeCompute()


@pytest.fixture
def builder(conf: cfg.ConfigOpts, db: Database, scheduler: FakeScheduler,
            computes: FakeCompute) -> build.InstanceBuilder:
    conf.set_override("host", "cond1")
    images = FakeImages()
    return build.InstanceBuilder(conf, db, computes, scheduler,  # type: ignore[arg-type]
                                 images=lambda: images)  # type: ignore[arg-type,return-value]


def _create(db: Database, count: int = 1, image: str = IMAGE.id, **extra: Any) -> list[str]:
    records = [InstanceCreate(
        uuid=f"00000000-0000-4000-8000-{index:012d}", project_id="p1", user_id="u1",
        display_name=f"vm-{index}", image_ref=image, flavor=dict(FLAVOR),
        reservation_id="r-1", launch_index=index,
        availability_zone=extra.get("availability_zone"),
        requested_host=extra.get("requested_host")) for index in range(count)]
    return [i["uuid"] for i in db_instances.instances_create(db, records)]


def test_build_goes_active_on_the_selected_host(builder: build.InstanceBuilder, db: Database,
                                                scheduler: FakeScheduler,
                                                computes: FakeCompute) -> None:
    (uuid,) = _create(db, availability_zone="az1")
    builder.build(CTXT, [uuid])
    instance = db_instances.instance_get(db, uuid)
    assert instance["vm_state"] == "active" and instance["task_state"] is None
    assert instance["host"] == "c1" and instance["node"] == "c1"
    assert instance["disk"]["backend"] == "raw" and instance["launched_at"] is not None
    assert computes.disks == {("c1", uuid): IMAGE.id}
    (spec,) = scheduler.specs
    assert spec.instance_uuids == [uuid] and spec.image["tesora_edition"] == "ee"
    assert spec.image["disk_format"] == "raw" and spec.availability_zone == "az1"
    assert spec.flavor.extra_specs == {"trait:CUSTOM_X": "required"}
    assert spec.flavor.memory_mb == 64 and spec.project_id == "p1"
    assert scheduler.claims == {uuid: "c1"}


def test_root_disk_size_is_the_flavors(builder: build.InstanceBuilder, db: Database,
                                       computes: FakeCompute) -> None:
    sizes: list[int | None] = []
    original = computes.create_instance_disk

    def spy(*args: Any, size: int | None = None) -> dict[str, Any]:
        sizes.append(size)
        return original(*args, size=size)

    computes.create_instance_disk = spy  # type: ignore[method-assign]
    builder.build(CTXT, _create(db))
    assert sizes == [1024**3]


def test_no_valid_host_is_error_with_novas_fault_and_filter_summary(
        builder: build.InstanceBuilder, db: Database, scheduler: FakeScheduler,
        computes: FakeCompute) -> None:
    uuids = _create(db, 2, requested_host="c9")
    builder.build(CTXT, uuids, min_count=2)
    for uuid in uuids:
        instance = db_instances.instance_get(db, uuid)
        assert instance["vm_state"] == "error" and instance["task_state"] is None
        assert instance["fault_message"] == ("No valid host was found. There are not enough "
                                             "hosts available.")
        assert instance["fault_code"] == 500
        assert instance["fault_details"] == (
            "ComputeFilter: 3 -> 3 host(s); AggregateImageStrictIsolation: 3 -> 0 host(s)")
    assert computes.disks == {} and scheduler.claims == {}
    assert scheduler.specs[0].force_host == "c9" and scheduler.specs[0].min_count == 2


def test_compute_failure_releases_the_claim(builder: build.InstanceBuilder, db: Database,
                                            scheduler: FakeScheduler,
                                            computes: FakeCompute) -> None:
    computes.fail["c1"] = exception.QemuImgError(action="create", reason="no space")
    (uuid,) = _create(db)
    builder.build(CTXT, [uuid])
    instance = db_instances.instance_get(db, uuid)
    assert instance["vm_state"] == "error" and instance["host"] == "c1"
    assert instance["fault_message"] == "qemu-img create failed: no space"
    assert scheduler.released == [uuid] and scheduler.claims == {}


def test_dead_compute_ends_in_error_not_build(builder: build.InstanceBuilder, db: Database,
                                              scheduler: FakeScheduler,
                                              computes: FakeCompute) -> None:
    computes.fail["c1"] = messaging.MessagingTimeout("Timed out waiting for a reply")
    (uuid,) = _create(db)
    builder.build(CTXT, [uuid])
    instance = db_instances.instance_get(db, uuid)
    assert instance["vm_state"] == "error"
    assert "MessagingTimeout" in (instance["fault_message"] or "")
    assert scheduler.claims == {}


def test_a_schedule_that_fails_after_claiming_leaves_no_claim(
        builder: build.InstanceBuilder, db: Database, scheduler: FakeScheduler) -> None:
    claim = scheduler.select_destinations

    def claims_then_fails(ctxt: RequestContext, spec: RequestSpec) -> list[Selection]:
        claim(ctxt, spec)
        raise exception.PlacementError(method="GET", url="/resource_providers/rp/usages",
                                       reason="503 Service Unavailable")

    scheduler.select_destinations = claims_then_fails  # type: ignore[method-assign]
    uuids = _create(db, 2)
    builder.build(CTXT, uuids)
    assert scheduler.claims == {}
    for uuid in uuids:
        instance = db_instances.instance_get(db, uuid)
        assert instance["vm_state"] == "error"
        assert instance["fault_message"] == (
            "Build of instance aborted: Placement GET /resource_providers/rp/usages failed: "
            "503 Service Unavailable")


def test_missing_image_fails_before_scheduling(builder: build.InstanceBuilder, db: Database,
                                               scheduler: FakeScheduler) -> None:
    (uuid,) = _create(db, image="22222222-2222-4222-8222-222222222222")
    builder.build(CTXT, [uuid])
    instance = db_instances.instance_get(db, uuid)
    assert instance["vm_state"] == "error" and "could not be found" in (
        instance["fault_message"] or "")
    assert scheduler.specs == []


def test_without_a_scheduler_every_build_is_no_valid_host(
        conf: cfg.ConfigOpts, db: Database, computes: FakeCompute) -> None:
    images = FakeImages()
    builder = build.InstanceBuilder(conf, db, computes, None,  # type: ignore[arg-type]
                                    images=lambda: images)  # type: ignore[arg-type,return-value]
    (uuid,) = _create(db)
    builder.build(CTXT, [uuid])
    assert db_instances.instance_get(db, uuid)["fault_message"].startswith(  # type: ignore[union-attr]
        "No valid host was found.")


def test_last_slots_go_to_exactly_that_many(builder: build.InstanceBuilder, db: Database,
                                            scheduler: FakeScheduler) -> None:
    scheduler.slots = 2
    for uuid in _create(db, 4):
        builder.build(CTXT, [uuid])
    states = [i["vm_state"] for i in db_instances.instance_list(db)]
    assert sorted(states) == ["active", "active", "error", "error"]
    assert len(scheduler.claims) == 2


def test_delete_removes_disk_and_claim(builder: build.InstanceBuilder, db: Database,
                                       scheduler: FakeScheduler, computes: FakeCompute) -> None:
    (uuid,) = _create(db)
    builder.build(CTXT, [uuid])
    builder.delete(CTXT, uuid)
    assert computes.disks == {} and scheduler.claims == {}
    record = db_instances.instance_get(db, uuid, read_deleted=True)
    assert record["vm_state"] == "deleted" and record["terminated_at"] is not None
    with pytest.raises(exception.InstanceNotFound):
        db_instances.instance_get(db, uuid)
    builder.delete(CTXT, uuid)  # again: nothing to do, no error


def test_delete_on_a_dead_compute_is_error_and_keeps_the_claim(
        builder: build.InstanceBuilder, db: Database, scheduler: FakeScheduler,
        computes: FakeCompute) -> None:
    (uuid,) = _create(db)
    builder.build(CTXT, [uuid])
    computes.fail_delete["c1"] = messaging.MessagingTimeout("gone")
    builder.delete(CTXT, uuid)
    instance = db_instances.instance_get(db, uuid)
    assert instance["vm_state"] == "error" and "could not be removed" in (
        instance["fault_message"] or "")
    assert scheduler.claims == {uuid: "c1"}
    del computes.fail_delete["c1"]
    builder.delete(CTXT, uuid)
    assert scheduler.claims == {} and computes.disks == {}


def test_delete_during_the_disk_build_cleans_up(builder: build.InstanceBuilder, db: Database,
                                                scheduler: FakeScheduler,
                                                computes: FakeCompute) -> None:
    (uuid,) = _create(db)

    def deleted_meanwhile(instance_uuid: str) -> None:
        db_instances.instance_update(db, instance_uuid, {"task_state": "deleting"})
        builder.delete(CTXT, instance_uuid)

    computes.on_create = deleted_meanwhile
    builder.build(CTXT, [uuid])
    assert computes.disks == {} and scheduler.claims == {}
    assert db_instances.instance_get(db, uuid, read_deleted=True)["vm_state"] == "deleted"


def test_a_deleted_instance_is_not_built(builder: build.InstanceBuilder, db: Database,
                                         scheduler: FakeScheduler) -> None:
    (uuid,) = _create(db)
    db_instances.instance_update(db, uuid, {"vm_state": "deleted", "task_state": None})
    builder.build(CTXT, [uuid])
    assert scheduler.specs == []


def test_rebuild_reschedules_on_the_same_host(builder: build.InstanceBuilder, db: Database,
                                              scheduler: FakeScheduler,
                                              computes: FakeCompute) -> None:
    (uuid,) = _create(db)
    builder.build(CTXT, [uuid])
    db_instances.instance_update(db, uuid, {"task_state": "rebuilding"})
    builder.rebuild(CTXT, uuid)
    instance = db_instances.instance_get(db, uuid)
    assert instance["vm_state"] == "active" and instance["task_state"] is None
    assert computes.disks == {("c1", uuid): IMAGE.id}
    # Its own host, through the host filters (not forced past them: Nova bug 1664931)
    rebuild = scheduler.specs[-1]
    assert rebuild.requested_destination == "c1" and rebuild.force_host is None
    # the instance keeps its allocation: a rebuild asks the filters again, claims nothing
    assert scheduler.specs[0].claim and not rebuild.claim


def test_rebuild_ignores_the_admins_forced_host_and_zone_of_the_build(
        builder: build.InstanceBuilder, db: Database, scheduler: FakeScheduler) -> None:
    (uuid,) = _create(db, requested_host="c2", availability_zone="az1")
    builder.build(CTXT, [uuid])
    db_instances.instance_update(db, uuid, {"task_state": "rebuilding"})
    builder.rebuild(CTXT, uuid)
    build_spec, rebuild = scheduler.specs
    assert build_spec.force_host == "c2" and build_spec.availability_zone == "az1"
    assert rebuild.force_host is None and rebuild.requested_destination == "c2"
    assert rebuild.availability_zone is None  # its host, whatever zone that is in now


def test_rebuild_of_an_instance_never_placed_is_error_without_scheduling(
        builder: build.InstanceBuilder, db: Database, scheduler: FakeScheduler,
        computes: FakeCompute) -> None:
    (uuid,) = _create(db)
    db_instances.instance_update(db, uuid, {"vm_state": "error", "task_state": "rebuilding"})
    builder.rebuild(CTXT, uuid)
    instance = db_instances.instance_get(db, uuid)
    assert instance["vm_state"] == "error" and instance["task_state"] is None
    assert "it has no host" in (instance["fault_message"] or "")
    # before: scheduled anywhere with claim=False, a disk made and nothing claimed for it
    assert scheduler.specs == [] and computes.disks == {}


def test_rebuild_with_an_image_the_host_cannot_take_is_error(
        builder: build.InstanceBuilder, db: Database, scheduler: FakeScheduler,
        computes: FakeCompute) -> None:
    (uuid,) = _create(db)
    builder.build(CTXT, [uuid])
    db_instances.instance_update(db, uuid, {"task_state": "rebuilding"})
    scheduler.error = exception.NoValidHost(reason="", filter_summary=[["ImageType", 1, 0]])
    builder.rebuild(CTXT, uuid)
    instance = db_instances.instance_get(db, uuid)
    assert instance["vm_state"] == "error"
    assert instance["fault_message"] == "No valid host was found. "
    assert computes.disks == {("c1", uuid): IMAGE.id}  # the old disk stays


def _conductor_service(db: Database, host: str, seen: datetime.datetime) -> None:
    db_services.service_register(db, host, binaries.CONDUCTOR, "conductor", None)
    with db.transaction() as session:
        svc = session.query(models.Service).filter_by(host=host).one()
        svc.last_seen_up = seen


def test_orphaned_builds_end_in_error(conf: cfg.ConfigOpts, db: Database) -> None:
    now = models.utcnow()
    conf.set_override("host", "me")
    _conductor_service(db, "alive", now)
    _conductor_service(db, "me", now)
    _conductor_service(db, "dead", now - datetime.timedelta(hours=1))
    uuids = _create(db, 4)
    for uuid, conductor in zip(uuids[:3], ["alive", "dead", "me"], strict=True):
        db_instances.instance_update(db, uuid, {"conductor_host": conductor})
    # uuids[3]: no conductor took it up yet, and it is recent: not given up.
    assert build.fail_orphaned(db, conf) == [uuids[1]]
    assert db_instances.instance_get(db, uuids[1])["fault_message"].startswith(  # type: ignore[union-attr]
        "Interrupted")
    # At its start a conductor fails what it left itself.
    assert build.fail_orphaned(db, conf, restarted=True) == [uuids[2]]
    assert db_instances.instance_get(db, uuids[0])["vm_state"] == "building"
    assert db_instances.instance_get(db, uuids[3])["vm_state"] == "building"
    with db.transaction() as session:
        old = now - datetime.timedelta(seconds=conf.long_rpc_timeout + 1)
        session.query(models.Instance).filter_by(uuid=uuids[3]).update(
            {"created_at": old, "updated_at": None})
    assert build.fail_orphaned(db, conf) == [uuids[3]]
