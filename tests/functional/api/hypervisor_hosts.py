"""The compute hosts the hypervisor tests look at: their services, inventory and servers."""

from __future__ import annotations

import datetime

from sqlalchemy import update

from fleetcache.common import instance_states
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db import models
from fleetcache.common.db import services as db_services
from fleetcache.common.db.instances import InstanceCreate
from fleetcache.common.db.session import Database

INVENTORY = {
    "VCPU": {"total": 8, "reserved": 0, "allocation_ratio": 16.0},
    "MEMORY_MB": {"total": 16384, "reserved": 512, "allocation_ratio": 1.5},
    "DISK_GB": {"total": 100, "reserved": 0, "allocation_ratio": 1.0},
}
FLAVOR = {"flavorid": "m1", "name": "m1", "vcpus": 2, "memory_mb": 1024, "root_gb": 10,
          "ephemeral_gb": 1, "swap": 0, "extra_specs": {}}


def hypervisor_hosts(db: Database) -> list[str]:
    """c1 with an inventory and two servers, c2 disabled without one, c3 silent (down)."""
    for host in ("c1", "c2", "c3"):
        capabilities = {"inventory": INVENTORY} if host == "c1" else {}
        db_services.service_register(db, host, "fleetcache-compute", "compute", None,
                                     capabilities=capabilities)
    db_services.service_register(db, "ctl", "fleetcache-conductor", "conductor", None)
    c2 = db_services.service_get(db, "c2", "fleetcache-compute")
    db_services.service_update(db, c2["id"], disabled=True, disabled_reason="maintenance")
    old = models.utcnow() - datetime.timedelta(hours=1)
    with db.transaction() as session:
        session.execute(update(models.Service).where(models.Service.host == "c3")
                        .values(last_seen_up=old))
    records = [InstanceCreate(uuid=f"00000000-0000-0000-0000-00000000000{n}", project_id="p1",
                              user_id="u1", display_name=f"vm{n}", image_ref="img",
                              flavor=FLAVOR, reservation_id="r-1", launch_index=n,
                              availability_zone=None, requested_host=None)
               for n in (1, 2)]
    for instance in db_instances.instances_create(db, records):
        db_instances.instance_update(db, instance["uuid"], {
            "host": "c1", "node": "c1", "vm_state": instance_states.ACTIVE,
            "task_state": None})
    return ["c1", "c2", "c3"]
