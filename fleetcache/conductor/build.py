"""The boot path in the conductor: build, rebuild and delete instances.

An instance here is a scheduled root disk: the scheduler picks a host and claims the flavor's
resources in Placement, then the host's compute creates the disk with ``create_instance_disk``
through the backend its ``images_type_mapping`` picks for the image's format, from its image
cache (a cached image is not downloaded again). The instance's state says what is true:

* ``building``/``scheduling`` (the API created it) -> ``spawning`` (a host was claimed) ->
  ``active`` when the disk exists;
* ``error`` with a fault otherwise: Nova's "No valid host was found. ..." when the scheduler
  placed nothing (admins also see which filter removed how many hosts), else the error of the
  step that failed. A claim is released whenever the disk was not made, so Placement's usages
  stay those of the instances that exist.

No step waits forever: the compute calls are bounded by ``long_rpc_timeout`` with call-monitor
heartbeats (a dead compute is noticed within ``rpc_response_timeout``), and instances whose
conductor died (or whose request never reached one) are put in ``error`` by
:func:`fail_orphaned`, a periodic task of every conductor.

Races with a delete: the API marks the instance ``deleting`` before it casts; the build's
state changes are conditional (``expected_task_state``), so a build that loses the race cleans
up what it made (disk, claim) itself, and the delete cleans up what exists when it runs.

Use (the conductor's RPC endpoint)::

    builder = InstanceBuilder(conf, db, computes, scheduler, images)
    builder.build(ctxt, instance_uuids, min_count)   # returns when every instance settled
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from oslo_config import cfg

from fleetcache.common import binaries, exception, servicegroup
from fleetcache.common import instance_states as states
from fleetcache.common.context import RequestContext
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db import models
from fleetcache.common.db import services as db_services
from fleetcache.common.db.instances import InstanceDict
from fleetcache.common.db.session import Database
from fleetcache.compute.rpcapi import ComputeAPI
from fleetcache.conductor.scheduler import FlavorSpec, RequestSpec, Selection
from fleetcache.image.source import ImageSource

LOG = logging.getLogger(__name__)

GiB = 1024**3
#: The owner Placement records for a server made without a project or user (a noauth
#: request sends none): Placement refuses a consumer whose project_id or user_id is empty.
NO_OWNER = "fleetcache-noauth"
#: Nova's fault code for a failed build or schedule (``instance_faults.code``).
FAULT_CODE = 500


class SchedulerAPI(Protocol):
    """What the boot path needs of the conductor's scheduler (``ConductorState.scheduler``)."""

    def select_destinations(self, ctxt: RequestContext, spec: RequestSpec) -> list[Selection]: ...

    def release(self, instance_uuid: str) -> None: ...

    def release_all(self, instance_uuids: list[str]) -> None: ...


class ComputeClients(Protocol):
    """Compute RPC clients per cell (``CellTransports``)."""

    def compute_api(self, cell: db_cells.CellDict | None) -> ComputeAPI: ...


def filter_summary_text(summary: Sequence[Sequence[Any]]) -> str | None:
    """``[(name, in, out), ...]`` as one line for the fault's details (admins only)."""
    if not summary:
        return None
    return "; ".join(f"{name}: {hosts_in} -> {hosts_out} host(s)"
                     for name, hosts_in, hosts_out in summary)


def _error_message(exc: BaseException) -> str:
    if isinstance(exc, exception.FleetcacheException):
        return exc.message
    return f"{type(exc).__name__}: {exc}"


class InstanceBuilder:
    """Runs build, rebuild and delete for the conductor's RPC endpoint.

    :param computes: compute RPC clients per cell.
    :param scheduler: ``None`` when ``[placement]`` is not configured: every build then ends
        in ``error`` with the no-valid-host fault.
    :param images: the image source (called for each build: loaded on first use).
    """

    def __init__(
        self,
        conf: cfg.ConfigOpts,
        db: Database,
        computes: ComputeClients,
        scheduler: SchedulerAPI | None,
        images: Callable[[], ImageSource],
    ) -> None:
        self.conf = conf
        self.db = db
        self.computes = computes
        self.scheduler = scheduler
        self.images = images

    # -- build -------------------------------------------------------------------------------

    def build(
        self, ctxt: RequestContext, instance_uuids: Sequence[str], min_count: int = 1
    ) -> None:
        """Schedule the instances together, then create each one's disk; never raises.

        :param min_count: fewer placed than this fails them all (Nova's ``min_count``).
        """
        instances = self._claim_task(instance_uuids)
        if not instances:
            return
        first = instances[0]
        try:
            image = self.images().show(ctxt, first["image_ref"]).to_dict()
            selections = self._select(ctxt, instances, image, min_count)
        except exception.NoValidHost as exc:
            LOG.info("No valid host for %s: %s", [i["uuid"] for i in instances],
                     filter_summary_text(exc.filter_summary))
            self._fail_all(instances, exc.message, filter_summary_text(exc.filter_summary))
            return
        except Exception as exc:  # noqa: BLE001 - every instance must end in a state
            LOG.exception("Scheduling %s failed", [i["uuid"] for i in instances])
            self._release_all(instances)
            self._fail_all(instances, "Build of instance aborted: " + _error_message(exc))
            return
        placed = {s.instance_uuid: s for s in selections}
        for instance in instances:
            selection = placed.get(instance["uuid"])
            if selection is None:
                self._fail(instance["uuid"], exception.NoValidHost(
                    reason="There are not enough hosts available.").message)
                continue
            self._spawn(ctxt, instance, selection)

    def _claim_task(self, instance_uuids: Sequence[str]) -> list[InstanceDict]:
        """The instances still waiting to be scheduled, now marked as this conductor's; the
        others (deleted meanwhile) are skipped."""
        claimed = []
        for uuid in instance_uuids:
            try:
                claimed.append(db_instances.instance_update(
                    self.db, uuid, {"conductor_host": self.conf.host},
                    expected_task_state=[states.SCHEDULING]))
            except (exception.InstanceNotFound, exception.InstanceInvalidState) as exc:
                LOG.info("Not building %s: %s", uuid, exc)
        return sorted(claimed, key=lambda i: i["launch_index"])

    def _select(
        self,
        ctxt: RequestContext,
        instances: Sequence[InstanceDict],
        image: dict[str, Any],
        min_count: int,
        rebuild_host: str | None = None,
    ) -> list[Selection]:
        """Ask the scheduler: a build goes where it places and claims the instances (only to
        the admin's ``requested_host`` when there is one, with no host filter, as Nova's
        forced host); a rebuild is checked on its own ``rebuild_host`` by the filters that
        judge the image and claims nothing (Nova's ``requested_destination``)."""
        if self.scheduler is None:
            raise exception.NoValidHost(
                reason="The conductor has no scheduler ([placement] is not configured).")
        first = instances[0]
        flavor = first["flavor"]
        spec = RequestSpec(
            instance_uuids=[i["uuid"] for i in instances],
            project_id=first["project_id"] or NO_OWNER,
            user_id=first["user_id"] or NO_OWNER,
            flavor=FlavorSpec(
                flavorid=flavor["flavorid"], vcpus=flavor["vcpus"],
                memory_mb=flavor["memory_mb"], root_gb=flavor["root_gb"],
                extra_specs=dict(flavor.get("extra_specs") or {}),
            ),
            image=image,
            # A rebuild stays on its host whatever zone that is in now (Nova does not check
            # the zone on rebuild either).
            availability_zone=None if rebuild_host else first["availability_zone"],
            force_host=None if rebuild_host else first["requested_host"],
            requested_destination=rebuild_host,
            min_count=min_count,
            claim=not rebuild_host,
        )
        return self.scheduler.select_destinations(ctxt, spec)

    def _spawn(self, ctxt: RequestContext, instance: InstanceDict, selection: Selection,
               expected: str = states.SCHEDULING) -> None:
        """Create the disk on the selected host; ``active``, or ``error`` and the claim
        released."""
        uuid = instance["uuid"]
        try:
            db_instances.instance_update(
                self.db, uuid,
                {"host": selection.host, "node": selection.host, "cell_id": selection.cell_id,
                 "task_state": states.SPAWNING if expected == states.SCHEDULING
                 else states.REBUILD_SPAWNING},
                expected_task_state=[expected])
        except (exception.InstanceNotFound, exception.InstanceInvalidState):
            LOG.info("Instance %s was deleted while it was scheduled", uuid)
            self._release(uuid)
            return
        flavor_gb = int(instance["flavor"].get("root_gb") or 0)
        try:
            disk = self._compute(selection.cell_id).create_instance_disk(
                ctxt, selection.host, uuid, instance["image_ref"],
                size=flavor_gb * GiB if flavor_gb else None)
        except Exception as exc:  # noqa: BLE001 - the instance must end in a state
            LOG.warning("Build of instance %s on %s failed: %s", uuid, selection.host,
                        _error_message(exc))
            self._release(uuid)
            self._fail(uuid, _error_message(exc))
            return
        self._activate(ctxt, uuid, selection.host, dict(disk))

    def _activate(self, ctxt: RequestContext, uuid: str, host: str,
                  disk: dict[str, Any]) -> None:
        now = models.utcnow()
        try:
            db_instances.instance_update(
                self.db, uuid,
                {"vm_state": states.ACTIVE, "task_state": None, "disk": disk,
                 "launched_at": now, "fault_message": None, "fault_code": None,
                 "fault_details": None, "fault_created_at": None},
                expected_task_state=[states.SPAWNING, states.REBUILD_SPAWNING])
        except (exception.InstanceNotFound, exception.InstanceInvalidState):
            LOG.info("Instance %s was deleted while its disk was made on %s; removing it",
                     uuid, host)
            self._cleanup_lost(ctxt, uuid, host)
            return
        LOG.info("Instance %s is active on %s (%s disk from %s, image %s)", uuid, host,
                 disk.get("backend"), disk.get("base"),
                 "downloaded" if disk.get("image_fetched") else "cached")

    def _cleanup_lost(self, ctxt: RequestContext, uuid: str, host: str) -> None:
        """Remove the disk and claim of an instance deleted during its build."""
        try:
            record = db_instances.instance_get(self.db, uuid, read_deleted=True)
            self._compute(record["cell_id"]).delete_instance_disk(ctxt, host, uuid)
        except Exception:  # noqa: BLE001 - logged; the delete's own cleanup may have run
            LOG.exception("Could not remove the disk of deleted instance %s on %s", uuid, host)
        self._release(uuid)

    # -- rebuild -----------------------------------------------------------------------------

    def rebuild(self, ctxt: RequestContext, instance_uuid: str) -> None:
        """Rebuild on the instance's host with its (new) ``image_ref``: the scheduler checks
        the host again for the image (image-type and isolation filters), then the old disk
        is replaced; never raises."""
        try:
            instance = db_instances.instance_update(
                self.db, instance_uuid, {"conductor_host": self.conf.host},
                expected_task_state=[states.REBUILDING])
        except (exception.InstanceNotFound, exception.InstanceInvalidState) as exc:
            LOG.info("Not rebuilding %s: %s", instance_uuid, exc)
            return
        if instance["host"] is None:
            # Placed nowhere (its build found no valid host), it has no host to be checked on
            # and holds no claim, and a rebuild claims nothing. Nova's API refuses it too
            # (compute.api's check_instance_host on rebuild).
            self._fail(instance_uuid, "Rebuild of instance aborted: it has no host (it was "
                       "never placed); delete it and create it again")
            return
        try:
            image = self.images().show(ctxt, instance["image_ref"]).to_dict()
            (selection,) = self._select(ctxt, [instance], image, 1,
                                        rebuild_host=instance["host"])
        except exception.NoValidHost as exc:
            self._fail_all([instance], exc.message, filter_summary_text(exc.filter_summary))
            return
        except Exception as exc:  # noqa: BLE001 - the instance must end in a state
            LOG.exception("Rebuild of %s could not be scheduled", instance_uuid)
            self._fail(instance_uuid, "Rebuild of instance aborted: " + _error_message(exc))
            return
        try:
            self._compute(instance["cell_id"]).delete_instance_disk(
                ctxt, instance["host"], instance_uuid)
        except Exception as exc:  # noqa: BLE001 - the instance must end in a state
            self._fail(instance_uuid, "Rebuild could not remove the old disk: "
                       + _error_message(exc))
            return
        self._spawn(ctxt, instance, selection, expected=states.REBUILDING)

    # -- delete ------------------------------------------------------------------------------

    def delete(self, ctxt: RequestContext, instance_uuid: str) -> None:
        """Remove the disk (on its host), release the claim, mark the instance deleted.

        A compute that cannot be reached leaves the instance in ``error`` with a fault saying
        so, its claim kept (the disk may still exist); deleting again retries. Never raises.
        """
        try:
            instance = db_instances.instance_update(
                self.db, instance_uuid, {"conductor_host": self.conf.host})
        except exception.InstanceNotFound:
            return
        host = instance["host"]
        if host is not None:
            try:
                self._compute(instance["cell_id"]).delete_instance_disk(
                    ctxt, host, instance_uuid)
            except Exception as exc:  # noqa: BLE001 - the instance must end in a state
                LOG.warning("Disk of %s on %s not removed: %s", instance_uuid, host,
                            _error_message(exc))
                self._fail(instance_uuid, f"Delete failed: the disk on {host} could not be "
                           f"removed: {_error_message(exc)}")
                return
        if not self._release(instance_uuid):
            self._fail(instance_uuid, "Delete failed: the Placement allocation could not be "
                       "released")
            return
        try:
            db_instances.instance_update(
                self.db, instance_uuid,
                {"vm_state": states.DELETED, "task_state": None,
                 "terminated_at": models.utcnow()})
        except exception.InstanceNotFound:
            pass
        LOG.info("Instance %s deleted%s", instance_uuid, f" from {host}" if host else "")

    # -- shared ------------------------------------------------------------------------------

    def _compute(self, cell_id: int | None) -> ComputeAPI:
        cell = next((c for c in db_cells.cell_list(self.db) if c["id"] == cell_id), None)
        return self.computes.compute_api(cell)

    def _release(self, instance_uuid: str) -> bool:
        if self.scheduler is None:
            return True
        try:
            self.scheduler.release(instance_uuid)
        except Exception:  # noqa: BLE001 - reported to the caller as False
            LOG.exception("Allocation of %s not released", instance_uuid)
            return False
        return True

    def _release_all(self, instances: Sequence[InstanceDict]) -> None:
        """Release every instance of a build whose scheduling failed unexpectedly. The
        scheduler promises that nothing stays claimed then; this keeps the module's promise
        (no claim without a disk) should it break it (a release of an instance that holds
        nothing is a 404, which is fine)."""
        if self.scheduler is not None:
            self.scheduler.release_all([instance["uuid"] for instance in instances])

    def _fail(self, instance_uuid: str, message: str, details: str | None = None) -> None:
        try:
            db_instances.instance_update(
                self.db, instance_uuid,
                {"vm_state": states.ERROR, "task_state": None,
                 **db_instances.fault_values(message, FAULT_CODE, details)})
        except exception.InstanceNotFound:
            LOG.info("Instance %s was deleted before its fault could be recorded: %s",
                     instance_uuid, message)

    def _fail_all(self, instances: Sequence[InstanceDict], message: str,
                  details: str | None = None) -> None:
        for instance in instances:
            self._fail(instance["uuid"], message, details)


def fail_orphaned(db: Database, conf: cfg.ConfigOpts, restarted: bool = False) -> list[str]:
    """Put in ``error`` the instances whose work no conductor will finish (a periodic task of
    every conductor, and its first act at start):

    * those of a conductor that is down (no heartbeat for ``service_down_time``), or of this
      conductor when it has just ``restarted``;
    * those no conductor took up (the cast was lost) for ``long_rpc_timeout``.

    A live conductor's work is left alone: each of its steps is bounded by the RPC timeouts.

    :returns: their uuids.
    """
    now = models.utcnow()
    up = {s["host"] for s in db_services.service_list(db, binary=binaries.CONDUCTOR)
          if servicegroup.service_is_up(s, conf.service_down_time, now)}
    if restarted:
        up.discard(conf.host)
    unclaimed_before = now - datetime.timedelta(seconds=conf.long_rpc_timeout)
    orphans = [
        busy["uuid"] for busy in db_instances.busy_list(db, now)
        if (busy["conductor_host"] is None and busy["changed_at"] < unclaimed_before)
        or (busy["conductor_host"] is not None and busy["conductor_host"] not in up)
    ]
    failed = db_instances.fail_busy(
        db, orphans, "Interrupted: the conductor working on this instance stopped (or never "
        "received the request); delete or rebuild it")
    if failed:
        LOG.warning("Instances left half done are now in error: %s", ", ".join(failed))
    return failed
