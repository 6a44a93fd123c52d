"""Helpers of the API functional tests: headers, the conductor stand-in, fault checks."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import webtest

from fleetcache.common import instance_states
from fleetcache.common.context import RequestContext
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db import jobs as db_jobs
from fleetcache.common.db import models
from fleetcache.common.db.session import Database

LATEST = {"OpenStack-API-Version": "compute 2.81"}
MEMBER = {"X-Roles": "member", "X-User-Id": "u1", "X-Project-Id": "p1"}
#: A project's member (and reader, as Keystone's implied roles make every member).
PROJECT_USER = {"X-Roles": "member,reader", "X-User-Id": "u1", "X-Project-Id": "p1"}
PROJECT_ADMIN = {"X-Roles": "admin,member,reader", "X-User-Id": "a1", "X-Project-Id": "p1"}


class StubConductorAPI:
    """Stands in for ConductorAPI in these fast tests: queues a job row, or raises ``error``;
    records the hosts whose aggregates it was asked to mirror into Placement, and the boot
    path's casts (``boot_calls``). With ``settle`` set, a build puts its instances ``active``
    on ``settle`` (a host), a rebuild makes them active again and a delete deletes them, as
    the conductor would (``tests/unit/conductor/test_build.py`` tests the real flow)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.calls: list[tuple[int, list[str]]] = []
        self.aggregate_syncs: list[str] = []
        self.boot_calls: list[tuple[str, Any]] = []
        #: The ``pin_seconds`` of each ``cache_images`` call.
        self.pins: list[int | None] = []
        #: The ``terms`` of each ``cache_images`` call (``None``: none sent).
        self.terms: list[dict[str, Any] | None] = []
        self.error: Exception | None = None
        self.settle: str | None = None

    def cache_images(
        self, ctxt: RequestContext, aggregate_id: int, image_ids: list[str],
        pin_seconds: int | None = None, terms: Mapping[str, Any] | None = None,
    ) -> db_jobs.JobDict:
        assert isinstance(ctxt, RequestContext)
        self.calls.append((aggregate_id, list(image_ids)))
        self.pins.append(pin_seconds)
        self.terms.append(None if terms is None else dict(terms))
        if self.error is not None:
            raise self.error
        aggregate = db_aggregates.aggregate_get(self.db, aggregate_id)
        pin_until = (None if pin_seconds is None else
                     models.utcnow() + datetime.timedelta(seconds=pin_seconds))
        return db_jobs.job_create(
            self.db, aggregate_id, aggregate["uuid"], image_ids, len(aggregate["hosts"]), "cond1",
            pin_until=pin_until, terms=terms,
        )


    def sync_host_aggregates(self, ctxt: RequestContext, host: str) -> None:
        assert isinstance(ctxt, RequestContext)
        self.aggregate_syncs.append(host)

    def _boot_call(self, method: str, arg: Any) -> None:
        self.boot_calls.append((method, arg))
        if self.error is not None:
            raise self.error

    def build_instances(
        self, ctxt: RequestContext, instance_uuids: list[str], min_count: int = 1
    ) -> None:
        self._boot_call("build_instances", (list(instance_uuids), min_count))
        for uuid in instance_uuids if self.settle else []:
            db_instances.instance_update(self.db, uuid, {
                "vm_state": instance_states.ACTIVE, "task_state": None, "host": self.settle,
                "node": self.settle})

    def rebuild_instance(self, ctxt: RequestContext, instance_uuid: str) -> None:
        self._boot_call("rebuild_instance", instance_uuid)
        if self.settle:
            db_instances.instance_update(self.db, instance_uuid, {
                "vm_state": instance_states.ACTIVE, "task_state": None})

    def delete_instance(self, ctxt: RequestContext, instance_uuid: str) -> None:
        self._boot_call("delete_instance", instance_uuid)
        if self.settle:
            db_instances.instance_update(self.db, instance_uuid, {
                "vm_state": instance_states.DELETED, "task_state": None})


class StubComputeAPI:
    """Stands in for every cell's compute RPC client: answers ``uptime`` (or raises
    ``error``) and records the hosts asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.uptime = " 09:05:07 up 3 days, 14:59,  2 users,  load average: 0.10, 0.20, 0.30"
        self.error: BaseException | None = None

    def get_host_uptime(self, ctxt: RequestContext, host: str) -> str:
        assert isinstance(ctxt, RequestContext)
        self.asked.append(host)
        if self.error is not None:
            raise self.error
        return self.uptime


def create_aggregate(app: webtest.TestApp, name: str = "agg1", **extra: Any) -> dict[str, Any]:
    body = {"aggregate": {"name": name, **extra}}
    aggregate: dict[str, Any] = app.post_json("/v2.1/os-aggregates", body, headers=LATEST).json[
        "aggregate"
    ]
    return aggregate


def fault(response: webtest.TestResponse, key: str, code: int) -> str:
    """Assert Nova's fault format and return the message."""
    assert response.status_int == code
    assert response.content_type == "application/json"
    assert list(response.json) == [key]
    assert response.json[key]["code"] == code
    message: str = response.json[key]["message"]
    assert message
    return message

