"""Asking one compute of a pre-cache job: its ``cache_images`` call and what the reply means.

The job (:class:`~.job.PrecacheJob`) decides which hosts are asked and counts their
outcomes; a :class:`HostCaller`, built once per run of the job, asks them. A worker of the
conductor's :class:`~.hostpool.HostCallPool` runs :meth:`HostCaller.call_host`, which blocks
on the host's call: one call for every image, or, when the image service's downloads are
limited (:mod:`~.origin`), one call per image, each under a download lease, the host stored
``waiting`` while it waits for one.

The host's outcome goes to the job's callback, once: its replies, checked
(:func:`~.results.checked_replies`), with ``unsupported`` for the images it was not asked
(its provider lacks their format's trait), or ``error`` for every image with the reason when
the call failed. A host never raises into the job::

    caller = HostCaller(ctxt, job_uuid, image_ids, pin_until, clients=cells,
                        host_calls=pool, db=db, metrics=None, gate=None,
                        queued=job_slots, host_done=job_host_done)
    pool.run(caller.call_host, position, plan)   # after job_slots.acquire()
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from fleetcache.common import job_terms
from fleetcache.common.context import RequestContext
from fleetcache.common.db import jobs
from fleetcache.common.db.cells import CellDict
from fleetcache.common.db.compute_states import ComputeState, PeerSite
from fleetcache.common.db.session import Database
from fleetcache.compute.rpcapi import PAUSED, ImageResult, Peer
from fleetcache.conductor.metrics import ConductorMetrics
from fleetcache.conductor.precache.handback import from_sources_in_turn, resumed_bytes
from fleetcache.conductor.precache.hostpool import HostCallPool
from fleetcache.conductor.precache.origin import DownloadGate, GateClosed, WaitAbandoned
from fleetcache.conductor.precache.peers import Assignment, PeerPlanner
from fleetcache.conductor.precache.results import (
    checked_replies,
    same_result_per_image,
)

LOG = logging.getLogger(__name__)


class ComputeClient(Protocol):
    """What the job needs of a compute RPC client (``compute.rpcapi.ComputeAPI``)."""

    @property
    def takes_peers(self) -> bool: ...

    @property
    def takes_terms(self) -> bool: ...

    @property
    def reports_refused_peers(self) -> bool: ...

    @property
    def reports_failed_peers(self) -> bool: ...

    def cache_images(
        self, ctxt: RequestContext, host: str, image_ids: list[str],
        pin_until: float | None = None, peers: dict[str, list[Peer]] | None = None,
        until: float | None = None, bytes_per_second: int | None = None,
        origin_after_refused_peers: bool = True,
        origin_after_failed_peers: bool = True,
    ) -> dict[str, ImageResult]: ...

    def serve_images(self, ctxt: RequestContext, host: str, job_uuid: str, key: str,
                     image_ids: list[str], until: float) -> list[str]: ...


class ComputeClients(Protocol):
    """Compute clients per cell (``conductor.cells.CellTransports``)."""

    def compute_api(self, cell: CellDict | None) -> ComputeClient: ...


@dataclasses.dataclass(frozen=True)
class HostPlan:
    """One host of the aggregate, with its compute service as looked up in bulk."""

    host: str
    #: The host's compute service, ``None`` when it has none.
    service: ComputeState | None
    #: Images the host cannot use (its provider lacks the format's trait), with the reason:
    #: ``unsupported`` without asking the host.
    unsupported: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: Its image server for peers, when the job distributes through peers and it runs one.
    site: PeerSite | None = None
    #: Images its last cache report holds (looked up only when the job uses peers): asked
    #: at once, without waiting for a peer. The call still takes an image service slot and
    #: download lease like any call without peers: the report may be older than the image's
    #: ageing, and the host then downloads it, within the caps.
    holds: frozenset[str] = frozenset()


#: The job's callback for a host's outcome: the host's position in the job's host list, and
#: a result for every image of the job.
HostDone = Callable[[int, dict[str, ImageResult]], None]


class HostCaller:
    """Asks the hosts of one job run; a host's failure is its outcome, never raised.

    :param job_uuid: the job, named on download leases and ``waiting`` results.
    :param image_ids: the job's images: each host's outcome has a result for every one.
    :param pin_until: epoch seconds the computes keep the images until; ``None``: no pin.
    :param clients: compute RPC clients per cell.
    :param host_calls: the conductor's pool of host calls: its stopping event.
    :param db: stores a host ``waiting`` for a download lease.
    :param metrics: counts host calls in flight; ``None`` counts nothing.
    :param gate: the image service's download slots; ``None`` or without limits: no lease.
    :param queued: the job's bound on calls submitted to the pool, taken by the job before
        it submits :meth:`call_host`, which gives it back when its call ends.
    :param host_done: the job's callback for a host's outcome (:data:`HostDone`).
    :param planner: the job's peer sources (:mod:`~.peers`); ``None``: every host fetches
        from the image service.
    :param peer_images: the images peers may send (the image service gives them a strong
        multihash, :func:`~fleetcache.image.verify.has_strong_hash`); the others are fetched
        from the image service as without peers (a compute would refuse their peers).
    :param terms: the job's window and limits (:mod:`fleetcache.common.job_terms`): no call
        starts outside the window, and a call of a compute that takes them (RPC 1.5) ends at
        the window's close (its download cut and kept) and is paced at ``call_rate``.
    :param call_rate: bytes a second for each call's downloads (the request's per-host rate
        and its share of the job's rate); ``None``: the computes' own caps only.
    :param origin_slots: the job's ``origin_downloads``: image service downloads of this job
        at once (one call per image, each holding a slot); ``None``: no limit of the job's.
    """

    def __init__(
        self,
        ctxt: RequestContext,
        job_uuid: str,
        image_ids: list[str],
        pin_until: float | None,
        *,
        clients: ComputeClients,
        host_calls: HostCallPool,
        db: Database,
        metrics: ConductorMetrics | None,
        gate: DownloadGate | None,
        queued: threading.BoundedSemaphore,
        host_done: HostDone,
        planner: PeerPlanner | None = None,
        peer_images: frozenset[str] = frozenset(),
        terms: Mapping[str, Any] | None = None,
        call_rate: int | None = None,
        origin_slots: threading.BoundedSemaphore | None = None,
    ) -> None:
        self.ctxt = ctxt
        self.uuid = job_uuid
        self.image_ids = image_ids
        self.pin_until = pin_until
        self.clients = clients
        self.host_calls = host_calls
        self.db = db
        self.metrics = metrics
        self.gate = gate
        self._queued = queued
        self._host_done = host_done
        self.planner = planner
        self.peer_images = peer_images
        self.terms = terms or {}
        #: Among jobs waiting for the same download slots, higher goes first.
        self.priority = int(self.terms.get("priority", job_terms.DEFAULT_PRIORITY))
        self.call_rate = call_rate
        self.origin_slots = origin_slots

    def call_host(self, position: int, plan: HostPlan) -> None:
        """Worker: one compute's ``cache_images`` call; never raises."""
        try:
            self._ask_host(position, plan)
        finally:
            self._queued.release()

    def _ask_host(self, position: int, plan: HostPlan) -> None:
        self.ctxt.update_store()
        metrics = self.metrics
        asked = [i for i in self.image_ids if i not in plan.unsupported]
        try:
            client = self._client(plan)
            if metrics is not None:
                metrics.in_flight.inc()
            try:
                replies = self._cache(client, plan, asked)
            finally:
                if metrics is not None:
                    metrics.in_flight.dec()
            results = self._results(plan, asked, replies)
        except Exception as exc:
            results = self._failed(plan, exc)
        if metrics is not None and plan.site is not None and self.planner is not None:
            metrics.record_group(plan.site["group"], results)
        self._host_done(position, results)

    def _client(self, plan: HostPlan) -> ComputeClient:
        """The host's client: its cell's (its error is the host's)."""
        return self.clients.compute_api(
            plan.service["cell"] if plan.service is not None else None)

    def _results(self, plan: HostPlan, asked: list[str],
                 replies: Mapping[str, ImageResult]) -> dict[str, ImageResult]:
        """Every image's result for the host: its replies, checked, and the ones it was not
        asked (``unsupported``)."""
        results = checked_replies(replies, asked)
        results.update({i: ImageResult(state="unsupported", reason=reason, bytes_downloaded=0)
                        for i, reason in plan.unsupported.items()})
        return {i: results[i] for i in self.image_ids}

    def _failed(self, plan: HostPlan, exc: BaseException) -> dict[str, ImageResult]:
        LOG.warning("Image pre-cache request to compute %s failed: %s: %s",
                    plan.host, type(exc).__name__, exc)
        return same_result_per_image(self.image_ids, "error", f"{type(exc).__name__}: {exc}")

    def _cache(self, client: ComputeClient, plan: HostPlan,
               image_ids: list[str]) -> dict[str, ImageResult]:
        """The host's ``cache_images`` replies: one call for every image, or, when the image
        service's downloads are limited or peers are its sources, one call per image, each
        under a download lease (:mod:`~.origin`) or from its peers (:mod:`~.peers`), the host
        stored ``waiting`` while it waits for either.

        :raises GateClosed: the conductor stopped while the host waited.
        """
        gate, host = self.gate, plan.host
        if self.planner is not None and plan.site is not None and client.takes_peers:
            replies: dict[str, ImageResult] = {}
            for image_id in image_ids:
                if image_id in self.peer_images:
                    replies[image_id] = self._cache_from_peers(client, plan, plan.site,
                                                               image_id)
                else:
                    replies.update(self._cache_gated(client, host, image_id))
            return replies
        if (gate is None or not gate.enabled) and self.origin_slots is None:
            return self._call(client, host, image_ids)
        replies = {}
        for image_id in image_ids:
            replies.update(self._cache_gated(client, host, image_id))
        return replies

    def _pin(self) -> dict[str, Any]:
        """The call's pin; only a pin needs compute RPC 1.2: without one, older computes
        are called as before."""
        return {} if self.pin_until is None else {"pin_until": self.pin_until}

    def _call(self, client: ComputeClient, host: str, image_ids: list[str],
              peers: dict[str, list[Peer]] | None = None,
              report_refused: bool = False, hand_back: bool = False) -> dict[str, ImageResult]:
        """The host's ``cache_images`` call for ``image_ids``, under the job's terms: none
        outside its window (every image ``paused``, for the next one), and, for a compute
        that takes them, an end time at the window's close and the job's pace.

        :param report_refused: have refused peer bytes come back (1.6) rather than the
            compute fetching the image again from the image service.
        :param hand_back: have an image whose peers all failed come back (1.7) rather than
            the compute fetching it from the image service outside the caps."""
        kwargs: dict[str, Any] = self._pin()
        if peers:
            kwargs["peers"] = peers
            if report_refused:
                kwargs["origin_after_refused_peers"] = False
            if hand_back:
                kwargs["origin_after_failed_peers"] = False
        if self.terms:
            now = datetime.datetime.now(datetime.UTC)
            period = job_terms.next_period(self.terms, now)
            if period is None or period.opens > now:
                return same_result_per_image(image_ids, PAUSED, "the job's window is closed")
            if client.takes_terms:
                if period.closes is not None:
                    kwargs["until"] = period.closes.timestamp()
                if self.call_rate:
                    kwargs["bytes_per_second"] = self.call_rate
        return client.cache_images(self.ctxt, host, image_ids, **kwargs)

    def _cache_gated(self, client: ComputeClient, host: str,
                     image_id: str) -> dict[str, ImageResult]:
        """One image from the image service, under a download lease when the image
        service's downloads are limited (:mod:`~.origin`)."""
        try:
            with self._origin_lease(host, image_id, Assignment()):
                return self._call(client, host, [image_id])
        except WaitAbandoned:
            return same_result_per_image([image_id], PAUSED, "the job's window closed while "
                                         "it waited for a download slot")

    def _cache_from_peers(self, client: ComputeClient, plan: HostPlan, site: PeerSite,
                          image_id: str) -> ImageResult:
        """One image of a host in a job with peers: from the source the planner assigns (an
        image its cache report holds: at once, from wherever it is), then the host offered
        as a source in turn.

        A compute of RPC 1.6 gives back peer bytes a check refused instead of fetching the
        image again from the image service, and one of 1.7 an image whose peers all failed
        in transport (dead, stalled), the bytes written kept: the planner then learns who
        failed and assigns the next source, one host of the group the image service under
        the group's slot and a download lease, the others a peer (with cut-through, the
        hosts of a chain behind a lying or dead peer would otherwise each fetch the image
        from the image service at once, around the caps). At most :data:`MAX_SOURCES`
        calls: the last fetches from the image service itself after refused or failed
        peers, as before 1.6.
        """
        return from_sources_in_turn(
            lambda report, hand_back: self._cache_assigned(client, plan, site, image_id,
                                                           report, hand_back),
            client.reports_refused_peers, client.reports_failed_peers,
            f"Job {self.uuid}: {plan.host}, image {image_id}")

    def _cache_assigned(self, client: ComputeClient, plan: HostPlan, site: PeerSite,
                        image_id: str, report: bool, hand_back: bool) -> tuple[ImageResult, int]:
        """One call for one image from the source the planner assigns, then the planner
        told what came of it. :returns: the image's result, and the bytes of it the call
        took from its paused download (kept by an earlier call that handed it back)."""
        planner = self.planner
        assert planner is not None
        host = plan.host
        show = functools.partial(self._show_waiting, host, image_id)
        reported = image_id in plan.holds
        assignment = (Assignment() if reported else
                      planner.assign(host, site, image_id, on_wait=show,
                                     stopping=self.host_calls.stopping, client=client,
                                     offer_origin=False))
        reply: ImageResult | None = None
        resumed = 0
        try:
            try:
                with self._origin_lease(host, image_id, assignment):
                    if reported:  # the group's hosts that lack it wait for it from now on
                        planner.expect(host, site, image_id)
                    elif assignment.from_origin:
                        planner.offer(host, site, image_id, client, assignment)
                    replies = self._call(
                        client, host, [image_id],
                        peers={image_id: assignment.peers} if assignment.peers else None,
                        report_refused=report, hand_back=hand_back)
            except WaitAbandoned:
                replies = same_result_per_image([image_id], PAUSED, "the job's window closed "
                                                "while it waited for a download slot")
            resumed = resumed_bytes(replies, image_id)
            # Checked before the planner reads it: a malformed reply is this image's error.
            reply = checked_replies(replies, [image_id])[image_id]
        finally:
            planner.finished(host, site, image_id, assignment, reply, client)
        if assignment.reason and not reply.get("fallback_reason"):
            reply = ImageResult(**{**reply, "fallback_reason": assignment.reason})
        return reply, resumed

    @contextlib.contextmanager
    def _origin_lease(self, host: str, image_id: str,
                      assignment: Assignment) -> Iterator[None]:
        """For an image taken from the image service: a slot of the job's own
        ``origin_downloads``, then a download lease (:mod:`~.origin`)."""
        gate = self.gate
        if not assignment.from_origin:
            yield
            return
        show = functools.partial(self._show_waiting, host, image_id)
        with contextlib.ExitStack() as held:
            if self.origin_slots is not None:
                held.enter_context(self._job_slot(self.origin_slots, show))
            if gate is not None and gate.enabled:
                held.enter_context(gate.hold(host, image_id, self.uuid, on_wait=show,
                                             stopping=self.host_calls.stopping,
                                             priority=self.priority,
                                             give_up=self._window_closed))
            yield

    def _window_closed(self) -> bool:
        """Whether the job's window closed (or its deadline came): a host waiting for a
        download slot stops waiting then, for the next window."""
        return bool(self.terms) and not job_terms.is_open(
            self.terms, datetime.datetime.now(datetime.UTC))

    @contextlib.contextmanager
    def _job_slot(self, slots: threading.BoundedSemaphore,
                  show: Callable[[str], None]) -> Iterator[None]:
        """One of the job's own image service downloads at once, the host ``waiting`` for it.

        :raises GateClosed: the conductor stopped while the host waited.
        """
        told = False
        while not slots.acquire(timeout=1.0):
            if self.host_calls.stopping.is_set():
                raise GateClosed("the conductor stopped while the host waited for a download "
                                 "slot of its job")
            if self._window_closed():
                raise WaitAbandoned("the job's window closed while the host waited for one "
                                    "of its download slots")
            if not told:
                told = True
                show(f"the job's origin_downloads ({self.terms.get('origin_downloads')}) "
                     "are all in progress")
        try:
            yield
        finally:
            slots.release()

    def _show_waiting(self, host: str, image_id: str, reason: str) -> None:
        """Store ``host`` as ``waiting`` for ``image_id`` until its outcome replaces it."""
        waiting = jobs.ResultFields(state=jobs.WAITING, reason=reason, bytes_downloaded=0)
        try:
            jobs.job_record_hosts(self.db, self.uuid, {host: {image_id: waiting}})
        except Exception as exc:  # only the display suffers; the host is still called
            LOG.warning("Could not show %s waiting in job %s: %s", host, self.uuid, exc)
