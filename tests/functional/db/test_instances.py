"""Instance queries (fleetcache.common.db.instances) on every database backend."""

from __future__ import annotations

import datetime

import pytest

from fleetcache.common import exception
from fleetcache.common.db import instances
from fleetcache.common.db.instances import InstanceCreate
from fleetcache.common.db.models import utcnow
from fleetcache.common.db.session import Database

pytestmark = pytest.mark.db


def _record(index: int, project: str = "p1") -> InstanceCreate:
    return InstanceCreate(
        uuid=f"00000000-0000-4000-8000-{index:012d}", project_id=project, user_id="u1",
        display_name=f"vm{index}", image_ref="img", flavor={"flavorid": "f1", "vcpus": 1},
        reservation_id="r-1", launch_index=index, availability_zone=None,
        requested_host=None)


def test_create_get_list(db: Database) -> None:
    created = instances.instances_create(db, [_record(1), _record(2, "p2")])
    assert [i["vm_state"] for i in created] == ["building", "building"]
    assert created[0]["task_state"] == "scheduling" and created[0]["flavor"]["vcpus"] == 1
    assert instances.instance_get(db, created[0]["uuid"])["display_name"] == "vm1"
    with pytest.raises(exception.InstanceNotFound):
        instances.instance_get(db, created[0]["uuid"], project_id="p2")
    assert [i["uuid"] for i in instances.instance_list(db, project_id="p2")] == [
        created[1]["uuid"]]
    assert len(instances.instance_list(db, uuids=[created[0]["uuid"]])) == 1


def test_conditional_update(db: Database) -> None:
    (instance,) = instances.instances_create(db, [_record(1)])
    uuid = instance["uuid"]
    updated = instances.instance_update(db, uuid, {"task_state": "spawning", "host": "c1"},
                                        expected_task_state=["scheduling"])
    assert updated["host"] == "c1" and updated["updated_at"] is not None
    with pytest.raises(exception.InstanceInvalidState):
        instances.instance_update(db, uuid, {"vm_state": "active"},
                                  expected_task_state=["scheduling"])
    with pytest.raises(exception.InvalidInput):
        instances.instance_update(db, uuid, {"uuid": "x"})
    instances.instance_update(db, uuid, {"vm_state": "deleted", "task_state": None})
    with pytest.raises(exception.InstanceNotFound):
        instances.instance_get(db, uuid)
    assert instances.instance_get(db, uuid, read_deleted=True)["vm_state"] == "deleted"
    assert instances.instance_list(db) == []


def test_busy_and_fail_busy(db: Database) -> None:
    first, second = instances.instances_create(db, [_record(1), _record(2)])
    instances.instance_update(db, second["uuid"], {"task_state": None, "vm_state": "active"})
    later = utcnow() + datetime.timedelta(seconds=5)
    busy = instances.busy_list(db, later)
    assert [b["uuid"] for b in busy] == [first["uuid"]]
    assert instances.fail_busy(db, [first["uuid"], second["uuid"]], "gone") == [first["uuid"]]
    failed = instances.instance_get(db, first["uuid"])
    assert failed["vm_state"] == "error" and failed["fault_message"] == "gone"
    assert failed["fault_code"] == 500 and failed["task_state"] is None


def test_what_the_owner_said_is_stored(db: Database) -> None:
    said = InstanceCreate(**_record(1), display_description="d", access_ip_v4="192.0.2.1",
                          access_ip_v6="2001:db8::1", auto_disk_config=True,
                          metadata={"role": "web", "k": ""})
    plain, full = instances.instances_create(db, [_record(2), said])
    assert plain["metadata"] == {} and plain["auto_disk_config"] is False
    assert plain["display_description"] is None and plain["access_ip_v4"] is None
    stored = instances.instance_get(db, full["uuid"])
    assert stored == full
    assert stored["metadata"] == {"role": "web", "k": ""}
    assert (stored["display_description"], stored["access_ip_v4"], stored["access_ip_v6"],
            stored["auto_disk_config"]) == ("d", "192.0.2.1", "2001:db8::1", True)
    assert [i["metadata"] for i in instances.instance_list(db)] == [{"role": "web", "k": ""},
                                                                    {}]
    updated = instances.instance_update(db, full["uuid"], {
        "display_description": None, "access_ip_v6": None, "auto_disk_config": False})
    assert updated["metadata"] == {"role": "web", "k": ""}
    assert (updated["display_description"], updated["access_ip_v6"],
            updated["auto_disk_config"]) == (None, None, False)


def test_metadata_update_merges_replaces_and_deletes(db: Database) -> None:
    (instance,) = instances.instances_create(db, [InstanceCreate(**_record(1),
                                                                 metadata={"a": "1"})])
    uuid = instance["uuid"]
    change = {"max_items": 3, "expected_vm_state": ["active"]}
    with pytest.raises(exception.InstanceInvalidState):  # still building
        instances.instance_metadata_update(db, uuid, {"b": "2"}, replace=False, **change)
    instances.instance_update(db, uuid, {"vm_state": "active", "task_state": None})
    assert instances.instance_metadata_update(
        db, uuid, {"b": "2"}, replace=False, **change) == {"a": "1", "b": "2"}
    assert instances.instance_metadata_update(
        db, uuid, {}, replace=False, deleted=["a"], **change) == {"b": "2"}
    assert instances.instance_metadata_update(
        db, uuid, {"c": "3"}, replace=True, **change) == {"c": "3"}
    with pytest.raises(exception.InstanceMetadataLimitExceeded):
        instances.instance_metadata_update(
            db, uuid, {"x": "", "y": "", "z": ""}, replace=False, **change)
    assert instances.instance_get(db, uuid)["metadata"] == {"c": "3"}
    assert instances.instance_metadata_update(
        db, uuid, {}, replace=True, **change) == {}
    assert instances.instance_get(db, uuid)["metadata"] == {}
