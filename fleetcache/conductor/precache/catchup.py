"""No host forgotten: hosts a job could not ask are ``pending`` and asked when they come back.

With ``[image_cache] catch_up_window`` set, a pre-cache job's first pass marks a down or
disabled host ``pending`` instead of ``skipped``, and a host added to the aggregate while the
window is open becomes ``pending`` too (:meth:`CatchUp.host_added`, from the API's
``sync_host_aggregates`` cast). After its first pass such a job is ``catching_up``. The
conductor owning it asks a pending host as soon as it is up and enabled:

* at once when the host's registration or heartbeat reaches this conductor
  (:meth:`CatchUp.host_seen`, a set look-up: no query per heartbeat);
* otherwise within ``[image_cache] catch_up_interval`` (:meth:`CatchUp.sweep`, which also
  ends the jobs whose window closed: their pending hosts end ``skipped``).

A pending host is asked under the image service's download slots (:mod:`~.origin`), as the
first pass asks, and under the job's terms: only within its window (a call cut at the window's
end leaves the host pending for the next one), at its pace, and never after its deadline (the
host then ends ``skipped``). A caught-up host's answer replaces its ``pending`` results and
sends its ``aggregate.cache_images.progress`` notification, as every host of the first pass
does (its ``index`` counts the job's hosts with an outcome so far); the images are pinned as
the job asked while its pin lasts. The job is ``done`` once no host is pending. The calls go
through the conductor's host call pool, so ``precache_concurrency`` holds for catch-up too, and
a host is asked by one catch-up at a time per job.

Policy for hosts added later (OpenKruise's ImagePullJob has both: ``completionPolicy:
Always`` ends a job once the nodes it found are done, ``Never`` keeps pulling on new matching
nodes forever): fleetcache includes a host added to the aggregate only while the job's
catch-up window is open, and never after. An operator who set a window asked for the
aggregate to hold the images for that long, and a host that joins then is exactly the case;
after the window the job is a finished record (``Always``), so an aggregate's membership
changes never wake old jobs, and a job's cost stays bounded by its window.
"""

from __future__ import annotations

import datetime
import logging
import threading
from typing import Any

from fleetcache.common import binaries, exception, job_terms
from fleetcache.common.context import RequestContext, get_admin_context
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import job_leases, jobs
from fleetcache.common.db import services as db_services
from fleetcache.common.db.aggregates import AggregateDict
from fleetcache.common.db.models import utcnow
from fleetcache.common.db.services import ServiceDict
from fleetcache.common.servicegroup import service_is_up
from fleetcache.compute.rpcapi import ImageResult
from fleetcache.conductor.precache import notifications
from fleetcache.conductor.precache.hostcall import ComputeClient
from fleetcache.conductor.precache.ownership import JobOwner
from fleetcache.conductor.precache.precacher import Precacher
from fleetcache.conductor.precache.results import (
    CACHED_STATES,
    checked_replies,
    same_result_per_image,
    unpaused,
)

LOG = logging.getLogger(__name__)

#: Why a pending host was not caught up: it left the aggregate.
REMOVED_REASON = "removed from the aggregate before it was caught up"


class CatchUp:
    """Catches up the pending hosts of the jobs this conductor owns.

    :param precacher: its compute clients, host call pool and database.
    :param owner: this conductor process as a job owner.
    """

    def __init__(self, precacher: Precacher, owner: JobOwner) -> None:
        self.precacher = precacher
        self.db = precacher.db
        self.owner = owner
        self._lock = threading.Lock()
        #: host -> jobs (of this owner) where it is pending; refreshed by every sweep.
        self._pending: dict[str, set[str]] = {}
        self._in_flight: set[tuple[str, str]] = set()

    @property
    def enabled(self) -> bool:
        return self.owner.catch_up_window > 0

    def host_seen(self, service: ServiceDict) -> None:
        """A compute registered or heartbeated: ask it now if it is pending here."""
        if service["binary"] != binaries.COMPUTE or service["disabled"]:
            return
        with self._lock:
            if service["host"] not in self._pending:
                return
        self._start(service["host"])

    def host_added(self, host: str) -> list[str]:
        """``host`` joined aggregates: make it pending in their jobs whose window is open.

        :returns: the uuids of those jobs.
        """
        if not self.enabled:
            return []
        added = job_leases.jobs_add_host(self.db, host, utcnow())
        if added:
            LOG.info("Compute %s added to the aggregate of pre-cache job(s) %s: pending",
                     host, ", ".join(added))
        return added

    def sweep(self) -> None:
        """End the jobs whose window closed, then ask every pending host that is back."""
        now = utcnow()
        for job in job_leases.jobs_catching_up(self.db, self.owner.owner):
            if job.terms and job_terms.past_deadline(job.terms, now.replace(tzinfo=datetime.UTC)):
                settled = job_leases.job_end_at_deadline(self.db, job.job_uuid, job.hosts or [],
                                                         now, owner=self.owner.owner)
                LOG.warning("Pre-cache job %s reached its deadline while catching up: %d "
                            "pending result(s) skipped", job.job_uuid, settled)
            elif job.catch_up_until is not None and job.catch_up_until <= now:
                closed = job_leases.job_close_window(self.db, job.job_uuid, now)
                LOG.warning("Catch-up window of pre-cache job %s closed: %d pending "
                            "result(s) skipped", job.job_uuid, closed)
            elif job_leases.job_finish_if_caught_up(self.db, job.job_uuid):
                LOG.info("Pre-cache job %s done: no host pending", job.job_uuid)
        pending: dict[str, set[str]] = {}
        for job_uuid, hosts in job_leases.pending_by_job(self.db, self.owner.owner).items():
            for host in hosts:
                pending.setdefault(host, set()).add(job_uuid)
        with self._lock:
            self._pending = pending
        if not pending:
            return
        services = db_services.service_list(self.db, binary=binaries.COMPUTE, hosts=list(pending))
        down_time = self.precacher.conf.service_down_time
        for service in services:
            if not service["disabled"] and service_is_up(service, down_time):
                self._start(service["host"])

    def _start(self, host: str) -> None:
        with self._lock:
            todo = [j for j in self._pending.get(host, ()) if (j, host) not in self._in_flight]
            self._in_flight.update((j, host) for j in todo)
        for job_uuid in todo:
            try:
                self.precacher.host_calls.submit(self._catch_up, job_uuid, host)
            except RuntimeError:  # the conductor is stopping
                self._done(job_uuid, host)
                return

    def _done(self, job_uuid: str, host: str) -> None:
        with self._lock:
            self._in_flight.discard((job_uuid, host))
            jobs_of_host = self._pending.get(host)
            if jobs_of_host is not None:
                jobs_of_host.discard(job_uuid)
                if not jobs_of_host:
                    del self._pending[host]

    def _catch_up(self, job_uuid: str, host: str) -> None:
        """Worker: ask one pending host of one job; never raises."""
        try:
            self._ask(job_uuid, host)
        except Exception:
            LOG.exception("Catch-up of compute %s in pre-cache job %s failed; tried again "
                          "by the next sweep", host, job_uuid)
        finally:
            self._done(job_uuid, host)

    def _ask(self, job_uuid: str, host: str) -> None:
        # NOTE: this host's results only: the whole job's are one ORM object per result,
        # read for each host caught up (``bench/conductor_memory.py --trace``,
        # docs/performance.md, "What a pre-cache job holds per host").
        job = jobs.job_get(self.db, job_uuid, results_of=host)
        if job["owner"] != self.owner.owner or job["state"] != jobs.CATCHING_UP:
            return
        pending = [r["image_id"] for r in job["results"]
                   if r["host"] == host and r["state"] == jobs.PENDING]
        if not pending:
            return
        try:
            aggregate = db_aggregates.aggregate_get_by_uuid(self.db, job["aggregate_uuid"])
        except exception.AggregateNotFound:
            aggregate = None
        ctxt = get_admin_context()
        if aggregate is None or host not in aggregate["hosts"]:
            self._record(ctxt, job, aggregate, host, {i: ImageResult(
                state="skipped", reason=REMOVED_REASON, bytes_downloaded=0) for i in pending})
            return
        terms, now = job["terms"], datetime.datetime.now(datetime.UTC)
        if terms and job_terms.past_deadline(terms, now):
            self._record(ctxt, job, aggregate, host, same_result_per_image(
                pending, "skipped", f"the job's deadline ({terms['deadline']}) passed first"))
            return
        if terms and not job_terms.is_open(terms, now):
            return  # outside the job's window: stays pending until it opens
        metas = ({i: self.precacher.images.show(ctxt, i).to_dict() for i in pending}
                 if self.precacher.image_support is not None else {})
        plan = self.precacher.plan_hosts(aggregate, [host], metas)[0]
        service = plan.service
        if (service is None or service["disabled"]
                or not service_is_up(service, self.precacher.conf.service_down_time)):
            return  # still away: stays pending
        asked = [i for i in pending if i not in plan.unsupported]
        LOG.info("Catching up compute %s in pre-cache job %s: %d image(s)",
                 host, job_uuid, len(asked))
        results = {i: ImageResult(state="unsupported", reason=plan.unsupported[i],
                                  bytes_downloaded=0) for i in pending if i in plan.unsupported}
        if asked:
            client = self.precacher.clients.compute_api(service["cell"])
            try:
                replies = self._cache(ctxt, client, job, host, asked)
            except Exception as exc:
                # NOTE: a host that has just come back may not consume its queue yet, or go
                # away again: it stays pending and the next sweep asks it again (until the
                # window closes), rather than ending ``error`` for a call it never saw.
                LOG.warning("Catch-up of compute %s in pre-cache job %s failed (%s: %s); it "
                            "stays pending", host, job_uuid, type(exc).__name__, exc)
                return
            results.update(unpaused(checked_replies(replies, asked), jobs.PENDING,
                                    "paused at the end of the job's window"))
        self._record(ctxt, job, aggregate, host, results)

    def _cache(self, ctxt: RequestContext, client: ComputeClient, job: jobs.JobDict, host: str,
               image_ids: list[str]) -> dict[str, ImageResult]:
        """The host's ``cache_images`` replies: one call, or, when the image service's
        downloads are limited, one call per image under a download lease, as the first pass
        does (:mod:`~.origin`). The host stays ``pending`` while it waits for a slot: a
        ``waiting`` result would leave the job nothing pending, and end it early.

        :raises GateClosed: the conductor stopped while the host waited.
        """
        gate = self.precacher.gate
        kwargs = {**_pin(job), **_terms(client, job, self.precacher.host_calls.size)}
        if gate is None or not gate.enabled:
            return client.cache_images(ctxt, host, image_ids, **kwargs)
        replies: dict[str, ImageResult] = {}
        for image_id in image_ids:
            with gate.hold(host, image_id, job["uuid"],
                           stopping=self.precacher.host_calls.stopping,
                           priority=job["terms"].get("priority", job_terms.DEFAULT_PRIORITY)):
                replies.update(client.cache_images(ctxt, host, [image_id], **kwargs))
        return replies

    def _record(self, ctxt: RequestContext, job: jobs.JobDict, aggregate: AggregateDict | None,
                host: str, results: dict[str, ImageResult]) -> None:
        job_uuid = job["uuid"]
        jobs.job_record_hosts(self.db, job_uuid, {host: results})
        LOG.info("Compute %s caught up in pre-cache job %s: %s", host, job_uuid,
                 ", ".join(f"{i} {r['state']}" for i, r in sorted(results.items())))
        self.precacher.notifier.progress(ctxt, notifications.AggregateCachePayload(
            id=job["aggregate_id"], uuid=job["aggregate_uuid"],
            name=aggregate["name"] if aggregate is not None else "", host=host,
            images_cached=sorted(i for i, r in results.items() if r["state"] in CACHED_STATES),
            images_failed=sorted(i for i, r in results.items() if r["state"] not in CACHED_STATES),
            index=job_leases.count_hosts_finished(self.db, job_uuid),
            total=job["total_hosts"], job_uuid=job_uuid))
        if job_leases.job_finish_if_caught_up(self.db, job_uuid):
            LOG.info("Pre-cache job %s done: every pending host caught up", job_uuid)


def _terms(client: ComputeClient, job: jobs.JobDict, at_once: int) -> dict[str, Any]:
    """The job's window end and pace for a compute that takes them (compute RPC 1.5): the
    stricter of the request's per-host rate and its job rate shared by the ``at_once``
    hosts catch-up may ask together (the conductor's pool)."""
    terms = job["terms"]
    if not terms or not client.takes_terms:
        return {}
    kwargs: dict[str, Any] = {}
    period = job_terms.next_period(terms, datetime.datetime.now(datetime.UTC))
    if period is not None and period.closes is not None:
        kwargs["until"] = period.closes.timestamp()
    rate = job_terms.call_rate(terms, at_once)
    if rate is not None:
        kwargs["bytes_per_second"] = rate
    return kwargs


def _pin(job: jobs.JobDict) -> dict[str, Any]:
    """The job's pin as the compute call takes it (compute RPC 1.2), while it lasts; none
    otherwise, so a compute that predates pins is called as before."""
    until = job["pin_until"]
    if until is None or until <= utcnow():
        return {}
    return {"pin_until": until.replace(tzinfo=datetime.UTC).timestamp()}
