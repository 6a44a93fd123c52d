"""The image pre-cache job: have every compute of an aggregate cache a list of images.

Nova's ``ComputeTaskManager.cache_images`` (Ussuri, ``nova/conductor/manager.py``) as a class,
with what Nova's lacks: a job record with per-host results the API can poll (Nova's spec has no
status API), bulk host-to-cell queries (Nova has one ``HostMapping`` query per host), an
outcome for every host (in Nova a failed call stays in an uninspected future, and an unmapped
host aborts the operation without ``.end``), and progress numbered under a lock.

1. :meth:`~.precacher.Precacher.start` validates the request, creates the job and launches a
   :class:`PrecacheJob` on the conductor's job coordinators.
2. :class:`PrecacheJob` marks the job ``running`` and sends ``aggregate.cache_images.start``.
   It maps the hosts to their compute services and cells :data:`LOOKUP_PAGE` hosts per query,
   and keeps at most twice the pool's size of calls submitted, so that its memory does not
   grow with the aggregate. Hosts that will not be asked are settled at once: no compute
   service is ``error``, a down or disabled compute is ``skipped`` with that reason
   (``pending`` when the job has a catch-up window: :mod:`~.catchup` asks it later). Every
   other host is one long ``cache_images`` call through its cell's transport, run on the
   conductor's :class:`~.hostpool.HostCallPool` of ``[image_cache] precache_concurrency``
   workers, so the limit holds across concurrent jobs. A :class:`~.hostcall.HostCaller`
   asks each host.
3. Every host ends in a state: an RPC failure or timeout is that host's ``error`` with the
   reason. Each outcome is counted under the job's lock (which numbers the ``progress``
   notification) and stored in batches by a :class:`~.results.ResultWriter`.
4. The job ends ``done`` (``failed`` when the job itself broke or the host pool stopped under
   it, the conductor stopping) with ``.end`` and one summary log line, plus a warning per
   image that failed somewhere.
"""

from __future__ import annotations

import collections
import datetime
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from oslo_config import cfg

from fleetcache.common import job_terms
from fleetcache.common.context import RequestContext
from fleetcache.common.db import job_leases, jobs
from fleetcache.common.db.aggregates import AggregateDict
from fleetcache.common.db.jobs import JobDict
from fleetcache.common.db.session import Database
from fleetcache.common.servicegroup import service_is_up
from fleetcache.compute.rpcapi import PAUSED, ImageResult
from fleetcache.conductor.metrics import ConductorMetrics
from fleetcache.conductor.precache import notifications
from fleetcache.conductor.precache.hostcall import ComputeClients, HostCaller, HostPlan
from fleetcache.conductor.precache.hostpool import HostCallPool
from fleetcache.conductor.precache.origin import DownloadGate
from fleetcache.conductor.precache.ownership import JobOwner
from fleetcache.conductor.precache.peers import PeerPlanner, PeerQuarantine
from fleetcache.conductor.precache.results import (
    CACHED_STATES,
    JobStats,
    ResultWriter,
    same_result_per_image,
    unpaused,
)
from fleetcache.image.verify import has_strong_hash

LOG = logging.getLogger(__name__)

#: Hosts whose compute services a job looks up in one query.
LOOKUP_PAGE = 500


class JobServices(Protocol):
    """What a running job uses of the conductor that started it (a
    :class:`~.precacher.Precacher`): the pools, clients and notifier the conductor built at
    start-up, and the planning of a page of hosts. Named here so that a job does not depend
    on how it was started (a request, :mod:`~.windows`, :mod:`~.takeover`)."""

    conf: cfg.ConfigOpts
    db: Database
    clients: ComputeClients
    notifier: notifications.CacheNotifier
    host_calls: HostCallPool
    job_runner: Callable[[Callable[[], None]], object]
    metrics: ConductorMetrics | None
    gate: DownloadGate | None
    owner: JobOwner | None
    quarantine: PeerQuarantine | None

    def plan_hosts(self, aggregate: AggregateDict, hosts: list[str],
                   metas: Mapping[str, Mapping[str, object]]) -> list[HostPlan]: ...

    def images_held(self, hosts: list[str], image_ids: list[str]) -> Mapping[str, int]: ...


class PrecacheJob:
    """One running job: fans out, gathers, counts, notifies and stores."""

    def __init__(
        self,
        precacher: JobServices,
        ctxt: RequestContext,
        aggregate: AggregateDict,
        job: JobDict,
        hosts: list[str],
        metas: Mapping[str, Mapping[str, object]],
        done_before: int = 0,
        resumed: bool = False,
    ) -> None:
        """:param hosts: the hosts to ask, planned :data:`LOOKUP_PAGE` at a time.
        :param metas: the image service's record of each image (for the image-type rule).
        :param done_before: hosts that already have results (a job taken over).
        :param resumed: a job taken over that its first conductor had started: its start
            notification was sent then, so it is not sent again."""
        self.precacher = precacher
        self.ctxt = ctxt
        self.aggregate = aggregate
        self.uuid = job["uuid"]
        self.image_ids = list(job["image_ids"])
        pin_until = job["pin_until"]
        #: Epoch seconds the computes keep the images until; None: no pin.
        self.pin_until = (None if pin_until is None else
                          pin_until.replace(tzinfo=datetime.UTC).timestamp())
        #: The hosts this run asks (all of the aggregate's, or those a takeover left).
        self.hosts = list(dict.fromkeys(hosts))
        self.metas = metas
        self.resumed = resumed
        self.stats = JobStats(hosts_done=done_before)
        self.total_hosts = max(job["total_hosts"], len(self.hosts) + done_before)
        #: Down or disabled hosts are ``pending`` (caught up later), not ``skipped``.
        self.catch_up = job.get("catch_up_until") is not None
        self.writer = ResultWriter(precacher.db, self.uuid)
        self._lock = threading.Lock()
        #: One byte per host of :attr:`hosts`, by position: 1 once it has its outcome.
        #:
        #: NOTE: a set of the hosts' names took far more room (``bench/conductor_memory.py``,
        #: docs/performance.md, "What a pre-cache job holds per host").
        self._done = bytearray(len(self.hosts))
        self._done_count = 0
        #: Set once every host has its outcome (and it is queued for the writer).
        self._all_done = threading.Event()
        self._hosts_total = len(self.hosts)
        #: Hosts handed out so far (settled, or their call made), in the order of :attr:`hosts`.
        self._handed = 0
        #: The request's window and limits (:mod:`fleetcache.common.job_terms`).
        self.terms: job_terms.JobTerms = job.get("terms") or {}  # type: ignore[assignment]
        #: Hosts left for the job's next window: cut at its end, or not asked before it.
        self._deferred = 0
        #: A job keeps at most twice the pool's size of calls submitted at once, and no more
        #: than its own ``parallelism``: those submitted are all that can run.
        #: NOTE: ``origin_downloads`` bounds it too: a call beyond it would hold a worker of
        #: the conductor's shared pool only to wait for the job's own download slot.
        self._queued = threading.BoundedSemaphore(min(
            2 * precacher.host_calls.size,
            self.terms.get("parallelism") or 2 * precacher.host_calls.size,
            self.terms.get("origin_downloads") or 2 * precacher.host_calls.size))

    def launch(self) -> None:
        """Run the job in the background; a job that cannot start is marked failed."""
        try:
            self.precacher.job_runner(self.run)
        except RuntimeError as exc:
            jobs.job_set_state(
                self.precacher.db, self.uuid, jobs.FAILED, error=f"not started: {exc}"
            )
            raise

    def run(self) -> None:
        """The whole job; never raises (a broken job is ``failed`` with the reason)."""
        self.ctxt.update_store()
        started = time.monotonic()
        error: str | None = None
        try:
            jobs.job_set_state(self.precacher.db, self.uuid, jobs.RUNNING)
            if not self.resumed:  # built for each notification: not kept while the job runs
                self.precacher.notifier.start(
                    self.ctxt, notifications.aggregate_payload(self.aggregate, self.uuid))
            self.writer.start()
            try:
                error = self._fan_out()
            finally:
                error = self.writer.close() or error
        except Exception as exc:
            LOG.exception("Image pre-cache job %s failed", self.uuid)
            error = f"{type(exc).__name__}: {exc}"
        owner = self.precacher.owner
        if error == _HANDED_OVER and owner is not None:  # its results are stored: let it go
            job_leases.job_release(self.precacher.db, self.uuid, owner.owner)
            LOG.warning("Image pre-cache job %s left to another conductor: this one stops",
                        self.uuid)
            return
        if error is None and self._deferred and self._schedule_next():
            return
        self._finish(error, time.monotonic() - started)
        self.precacher.notifier.end(self.ctxt, self._end_payload())

    def _end_payload(self) -> notifications.AggregateEndPayload:
        """The end notification's payload, with where the job's downloads came from.

        NOTE: reads the job's results once more, as the API's view of the job does; a job
        whose results cannot be read still ends with its notification, without them."""
        distribution = None
        try:
            distribution = jobs.job_distribution(jobs.job_get(self.precacher.db, self.uuid))
        except Exception as exc:
            LOG.warning("Job %s: its end notification goes without its distribution: %s",
                        self.uuid, exc)
        return notifications.end_payload(self.aggregate, self.uuid, distribution)

    def _fan_out(self) -> str | None:
        """Settle or submit every host, then wait for all. :returns: an error, if the job broke
        or was interrupted.

        A job that breaks while handing its hosts out (the database failing on a later page
        of service lookups, say) still waits for the calls it made, so that their outcomes
        are stored before the result writer closes, and the hosts it did not reach are each
        an ``error`` saying why: every host ends in a state."""
        host_calls = self.precacher.host_calls
        broke: str | None = None
        self._holders_first()
        try:
            self._hand_out(host_calls)
        except Exception as exc:
            LOG.exception("Image pre-cache job %s broke while asking its hosts", self.uuid)
            broke = f"{type(exc).__name__}: {exc}"
            self._settle_unasked(f"not asked: the job broke: {broke}")
        self._wait(host_calls.stopping)
        with self._lock:
            missing = [n for n, done in enumerate(self._done) if not done]
        if not missing:
            return broke
        if self.precacher.owner is not None:
            return _HANDED_OVER  # its hosts without results are asked by the next owner
        reason = "interrupted: the conductor stopped before this host answered"
        for position in missing:
            self._host_done(position, same_result_per_image(self.image_ids, "error", reason))
        return "interrupted: the conductor stopped while the job ran"

    def _holders_first(self) -> None:
        """With peers, order :attr:`hosts` so that those whose cache reports hold more of the
        job's images are called first, the order otherwise kept; before any host is handed
        out (a host's position is its index in :attr:`hosts`).

        A host that lacks an image takes its group's image service slot when no holder of
        the group is known or under way (:meth:`~.peers.PeerPlanner.expect`): called before
        the hosts an earlier run of the job cached (a run in its next window, or taken
        over), it would fetch a second copy of what its group already holds. A job whose
        cache reports cannot be read keeps its order: only the copies suffer.

        NOTE: one more query per image and :data:`LOOKUP_PAGE` hosts, for the whole run
        before its first call; only the hosts holding an image are kept (a count each).
        """
        if self.precacher.quarantine is None or len(self.hosts) < 2:
            return
        held: collections.Counter[str] = collections.Counter()
        try:
            for start in range(0, len(self.hosts), LOOKUP_PAGE):
                held.update(self.precacher.images_held(self.hosts[start:start + LOOKUP_PAGE],
                                                       self.image_ids))
        except Exception as exc:  # noqa: BLE001 - the hosts are still called, in list order
            LOG.warning("Image pre-cache job %s calls its hosts in list order: their cache "
                        "reports could not be read: %s: %s", self.uuid, type(exc).__name__, exc)
            return
        if held:
            self.hosts.sort(key=lambda host: -held[host])

    def _hand_out(self, host_calls: HostCallPool) -> None:
        """Settle or submit every host in order, until all are, the pool is stopping or the
        job's window closes (the rest wait for the next one, or end ``skipped`` at the
        deadline); :attr:`_handed` follows the hosts handed out."""
        caller = self._caller()
        for position, plan in self._plans():
            settled = self._settle(plan)
            if settled is not None:
                self._host_done(position, settled)
            else:
                if not self._take_slot(host_calls.stopping):
                    return
                if not self._window_open():
                    self._queued.release()
                    self._defer_unasked()
                    return
                try:
                    host_calls.run(caller.call_host, position, plan, priority=caller.priority)
                except RuntimeError:  # the pool was shut down: the conductor is stopping
                    return
            self._handed = position + 1

    def _window_open(self) -> bool:
        """Whether the job may start a download now (always, without a window or deadline)."""
        return not self.terms or job_terms.is_open(self.terms, datetime.datetime.now(
            datetime.UTC))

    def _defer_unasked(self) -> None:
        """The window closed: every host not handed out waits for the next one (nothing is
        stored for it: a host without results is asked in the job's next window)."""
        with self._lock:
            unasked = [n for n in range(self._handed, self._hosts_total) if not self._done[n]]
            for position in unasked:
                self._mark_done(position)
            self._deferred += len(unasked)
        if unasked:
            LOG.info("Image pre-cache job %s: its window closed; %d host(s) wait for the next",
                     self.uuid, len(unasked))

    def _schedule_next(self) -> bool:
        """After a run that left hosts for the next window: schedule the job for it.

        :returns: False when no window opens before the deadline (the job then ends: its
            hosts without a final result are ``skipped``, :meth:`_finish`).
        """
        db, owner = self.precacher.db, self.precacher.owner
        mine = owner.owner if owner is not None else None
        now = datetime.datetime.now(datetime.UTC)
        period = job_terms.next_period(self.terms, now)
        if period is None:
            job_leases.job_end_at_deadline(db, self.uuid, self.hosts,
                                           now.replace(tzinfo=None), owner=mine)
            return False
        # A compute whose clock runs ahead cuts its call before the window's end here: the
        # job is then due at once, and asked again until this conductor sees the end too.
        if not jobs.job_schedule(db, self.uuid, period.opens.replace(tzinfo=None), owner=mine):
            LOG.warning("Image pre-cache job %s is another conductor's now: this run stops "
                        "without scheduling it", self.uuid)
            return True
        LOG.info("Image pre-cache job %s: %d host(s) wait for its next window, at %s",
                 self.uuid, self._deferred, job_terms.format_instant(period.opens))
        return True

    def _settle_unasked(self, reason: str) -> None:
        """Every host not handed out is an ``error`` with ``reason``."""
        with self._lock:
            unasked = [n for n in range(self._handed, self._hosts_total) if not self._done[n]]
        for position in unasked:
            self._host_done(position, same_result_per_image(self.image_ids, "error", reason))

    def _caller(self) -> HostCaller:
        """What asks this run's hosts, each outcome coming to :meth:`_host_done`.

        Built for the run, not kept on the job: the caller holds the job's :meth:`_host_done`,
        so the job holding the caller would make a reference cycle, and a finished job would
        wait for the garbage collector instead of going with its last reference."""
        precacher = self.precacher
        planner = (None if precacher.quarantine is None else
                   PeerPlanner(precacher.conf, self.ctxt, self.uuid, precacher.quarantine))
        peer_images = frozenset(
            i for i, meta in self.metas.items()
            if has_strong_hash(meta.get("os_hash_algo"), meta.get("os_hash_value")))
        origin = self.terms.get("origin_downloads")
        return HostCaller(
            self.ctxt, self.uuid, self.image_ids, self.pin_until, clients=precacher.clients,
            host_calls=precacher.host_calls, db=precacher.db, metrics=precacher.metrics,
            gate=precacher.gate, queued=self._queued, host_done=self._host_done,
            planner=planner, peer_images=peer_images, terms=self.terms,
            call_rate=self._call_rate(),
            origin_slots=threading.BoundedSemaphore(origin) if origin else None)

    def _call_rate(self) -> int | None:
        """Bytes a second for each host call's downloads (:func:`~fleetcache.common.
        job_terms.call_rate`), the job rate shared by the most calls of this run that can
        download at once: its parallelism, its ``origin_downloads``, the image service's
        slots, its hosts."""
        terms, hosts, gate = self.terms, len(self.hosts), self.precacher.gate
        limits = (terms.get("parallelism") or self.precacher.host_calls.size,
                  terms.get("origin_downloads"),
                  gate.limits.total if gate is not None else None, hosts)
        return job_terms.call_rate(terms, min(n for n in limits if n) if hosts else 1)

    def _plans(self) -> Iterator[tuple[int, HostPlan]]:
        """Each host's position in :attr:`hosts` and its plan, with its compute service looked
        up in bulk :data:`LOOKUP_PAGE` hosts at a time, so that a job holds one page of service
        rows, not the whole fleet's.

        NOTE: one lookup of all the hosts' services raised the conductor's peak resident size
        with the fleet (ORM rows, then a dict per host kept for the whole job;
        ``bench/fanout.py --hosts 10000``, docs/performance.md, "What a pre-cache job holds per
        host").
        """
        for start in range(0, len(self.hosts), LOOKUP_PAGE):
            page = self.hosts[start:start + LOOKUP_PAGE]
            yield from enumerate(self.precacher.plan_hosts(self.aggregate, page, self.metas),
                                 start)

    def _take_slot(self, stopping: threading.Event) -> bool:
        """Wait until fewer than twice the pool's size of this job's calls are queued or
        running. :returns: False when the pool is stopping instead.

        NOTE: submitting every host at once kept one future and one queued work item per host
        alive for the whole job (``bench/fanout.py --hosts 10000``, docs/performance.md, "What
        a pre-cache job holds per host").
        """
        while not self._queued.acquire(timeout=1.0):
            if stopping.is_set():
                return False
        return True

    def _wait(self, stopping: threading.Event) -> None:
        """Wait until every host has its outcome, or until the pool is stopping (then the
        calls in flight are abandoned: they may run for up to ``long_rpc_timeout``).

        NOTE: ``concurrent.futures.wait`` on the job's futures, once a second, hooked a waiter
        onto every pending future each time (py-spy at 1,000 hosts, docs/performance.md, "The
        pre-cache job's own CPU per host"). The last host's outcome sets an event instead.
        """
        if not self._hosts_total:
            return
        while not self._all_done.wait(1.0):
            if stopping.is_set():
                return

    def _settle(self, plan: HostPlan) -> dict[str, ImageResult] | None:
        """The results of a host that will not be asked, or ``None`` to ask it."""
        service = plan.service
        if service is None:
            return same_result_per_image(self.image_ids, "error", "host has no compute service")
        skipped = "pending" if self.catch_up else "skipped"
        if not service_is_up(service, self.precacher.conf.service_down_time):
            LOG.info("Image pre-cache request to compute %s %s: it is down", plan.host, skipped)
            return same_result_per_image(self.image_ids, skipped, "down")
        if service["disabled"]:
            LOG.info("Image pre-cache request to compute %s %s: it is disabled",
                     plan.host, skipped)
            return same_result_per_image(self.image_ids, skipped, "disabled")
        if all(i in plan.unsupported for i in self.image_ids):
            return {i: ImageResult(state="unsupported", reason=plan.unsupported[i],
                                   bytes_downloaded=0) for i in self.image_ids}
        return None

    def _host_done(self, position: int, results: dict[str, ImageResult]) -> None:
        """Count the host at ``position`` of :attr:`hosts` once it has finished (once), queue
        its results, then its progress notification. A host with an image ``paused`` at the
        end of the job's window is left for the next one (at the deadline: ``skipped``)."""
        if any(r["state"] == PAUSED for r in results.values()):
            if not job_terms.past_deadline(self.terms, datetime.datetime.now(datetime.UTC)):
                self._host_deferred(position, results)
                return
            results = unpaused(results, "skipped",
                               f"the job's deadline ({self.terms.get('deadline')}) passed first")
        host = self.hosts[position]
        payload = notifications.AggregateCachePayload(
            id=self.aggregate["id"], uuid=self.aggregate["uuid"], name=self.aggregate["name"],
            host=host,
            images_cached=[i for i, r in results.items() if r["state"] in CACHED_STATES],
            images_failed=[i for i, r in results.items() if r["state"] not in CACHED_STATES],
            index=0, total=self.total_hosts, job_uuid=self.uuid,
        )
        with self._lock:  # index and queue order agree: progress is sent in index order
            if self._done[position]:
                return
            self.stats.add_host(results)
            if self.precacher.metrics is not None:
                self.precacher.metrics.record_host(results)
            payload["index"] = self.stats.hosts_done
            self.writer.put(host, results,
                            lambda: self.precacher.notifier.progress(self.ctxt, payload))
            self._mark_done(position)

    def _host_deferred(self, position: int, results: dict[str, ImageResult]) -> None:
        """A host cut at the window's end: its finished images are stored as they are, the
        paused ones ``waiting`` (with the bytes kept), and it is asked in the next window."""
        host = self.hosts[position]
        stored = unpaused(results, jobs.WAITING, "paused at the end of the job's window")
        with self._lock:
            if self._done[position]:
                return
            self.writer.put(host, stored)
            self._deferred += 1
            self._mark_done(position)

    def _mark_done(self, position: int) -> None:
        """The host at ``position`` needs nothing more of this run (the job's lock held);
        the last one ends the wait of :meth:`_wait`, after its results were queued."""
        self._done[position] = 1
        self._done_count += 1
        if self._done_count == self._hosts_total:
            self._all_done.set()

    def _finish(self, error: str | None, elapsed: float) -> None:
        state = jobs.FAILED if error else jobs.DONE
        try:  # done, or catching_up while a host is pending
            owner = self.precacher.owner
            state = job_leases.job_end_first_pass(self.precacher.db, self.uuid, error,
                                                  owner.owner if owner else None)
        except Exception:
            LOG.exception("Could not mark image pre-cache job %s %s", self.uuid, state)
        LOG.info("Image pre-cache job %s on aggregate %s completed in %.2f s: %s",
                 self.uuid, self.aggregate["id"], elapsed, self.stats.summary())
        for image_id, count in sorted(self.stats.failed_images.items()):
            LOG.warning("Image %s failed %i times in pre-cache job %s",
                        image_id, count, self.uuid)
        if error:
            LOG.error("Image pre-cache job %s failed: %s", self.uuid, error)


#: What ``_fan_out`` returns when the conductor stops and lets another one take the job over.
_HANDED_OVER = "handed over"

