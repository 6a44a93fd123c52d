"""Starting a pre-cache job: validate the request, create the job, launch or schedule it.

:meth:`Precacher.start` runs inside the conductor's ``cache_images`` RPC. It looks the
aggregate and each image up once (a missing image fails the request before any host is asked
and no job is created), creates the job (``queued``), hands it to the conductor's job
coordinators as a :class:`~.job.PrecacheJob` and returns it; a job whose window is not open
yet is ``scheduled`` instead (:mod:`~.windows` starts it then). :meth:`Precacher.plan_hosts`
is how a running job learns about a page of its hosts: their compute services, the images
they cannot use, and with peers their sites and the images their cache reports hold
(:meth:`Precacher.images_held` counts the latter, for the job to call holders first).

The conductor process builds the :class:`Precacher` at start-up with its pools, clients and
notifier (:mod:`fleetcache.conductor.precache` shows how).
"""

from __future__ import annotations

import collections
import datetime
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from oslo_config import cfg

from fleetcache.common import binaries, exception, job_terms
from fleetcache.common.context import RequestContext
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import host_images, jobs
from fleetcache.common.db.aggregates import AggregateDict
from fleetcache.common.db.compute_states import compute_states, peer_sites
from fleetcache.common.db.jobs import JobDict
from fleetcache.common.db.models import utcnow as models_utcnow
from fleetcache.common.db.session import Database
from fleetcache.conductor.metrics import ConductorMetrics
from fleetcache.conductor.precache import notifications
from fleetcache.conductor.precache.hostcall import ComputeClients, HostPlan
from fleetcache.conductor.precache.hostpool import HostCallPool
from fleetcache.conductor.precache.job import PrecacheJob
from fleetcache.conductor.precache.origin import DownloadGate
from fleetcache.conductor.precache.ownership import JobOwner
from fleetcache.conductor.precache.peers import PeerQuarantine
from fleetcache.conductor.scheduler.image_support import ImageTypeSupport
from fleetcache.image import source as image_source

LOG = logging.getLogger(__name__)


class Precacher:
    """Starts pre-cache jobs for one conductor.

    :param host: the conductor's host name, stored on its jobs so that a restart marks the
        ones it left unfinished.
    :param clients: compute RPC clients per cell.
    :param notifier: sends the jobs' notifications.
    :param host_calls: the conductor's pool that calls computes, shared by its jobs; a job
        stops waiting for its hosts once the pool is :attr:`~HostCallPool.stopping`.
    :param job_runner: runs a job's coordinating function in the background (the conductor's
        bounded coordinator pool's ``submit``); it raises ``RuntimeError`` once stopped.
    :param images: the image source; default ``[image_source] backend``, loaded on first use.
    :param image_support: tells which hosts lack an image's format trait in Placement (``None``:
        every host is asked).
    :param metrics: counts host calls in flight and per-host results (the conductor's
        Prometheus registry); ``None`` counts nothing.
    :param gate: the image service's download slots shared by every conductor
        (:mod:`~.origin`); ``None`` or without limits: hosts are called without a lease.
    :param owner: this conductor process as a job owner: its jobs get its lease and catch-up
        window (``None``: no lease, no catch-up).
    :param quarantine: sources whose bytes failed verification, shared by the conductor's
        jobs; ``None``: jobs do not distribute through peers (``[image_cache]
        peer_distribution`` off).
    """

    def __init__(
        self,
        conf: cfg.ConfigOpts,
        db: Database,
        host: str,
        clients: ComputeClients,
        notifier: notifications.CacheNotifier,
        host_calls: HostCallPool,
        job_runner: Callable[[Callable[[], None]], object],
        images: image_source.ImageSource | None = None,
        image_support: ImageTypeSupport | None = None,
        metrics: ConductorMetrics | None = None,
        gate: DownloadGate | None = None,
        owner: JobOwner | None = None,
        quarantine: PeerQuarantine | None = None,
    ) -> None:
        self.conf = conf
        self.quarantine = quarantine
        self.owner = owner
        self.image_support = image_support
        self.metrics = metrics
        self.db = db
        self.host = host
        self.clients = clients
        self.notifier = notifier
        self.host_calls = host_calls
        self.job_runner = job_runner
        self._images = images
        self.gate = gate

    @property
    def images(self) -> image_source.ImageSource:
        if self._images is None:
            self._images = image_source.load_image_source(self.conf)
        return self._images

    def start(self, ctxt: RequestContext, aggregate_id: int, image_ids: list[str],
              pin_seconds: int | None = None,
              terms: Mapping[str, Any] | None = None) -> JobDict:
        """Validate the request, create its job and start it, or schedule it when its window
        is not open yet (:mod:`~.windows` starts it then).

        :param pin_seconds: pin the images on the hosts for this long from now (the ageing
            pass keeps them until then); ``None``: no pin.
        :param terms: the request's window and limits (:mod:`fleetcache.common.job_terms`),
            checked again here against this conductor's caps.
        :returns: the job as created (``queued``, or ``scheduled`` with ``next_start_at``).
        :raises AggregateNotFound:
        :raises ImageNotFound, ImageNotAvailable: before any host is asked; no job is created.
        :raises InvalidInput: when ``image_ids`` is empty, or for terms beyond the caps.
        """
        if not image_ids:
            raise exception.InvalidInput(reason="no image to cache")
        now = datetime.datetime.now(datetime.UTC)
        checked = job_terms.check_terms(terms or {}, job_terms.Caps.from_conf(self.conf), now)
        period = job_terms.next_period(checked, now)
        assert period is not None, "check_terms refuses terms without a period"
        aggregate = db_aggregates.aggregate_get(self.db, aggregate_id)
        # By the image service's spelling of each id (the API takes any UUID form, e.g.
        # upper case, which Glance on MySQL answers in lower case): one job entry per image.
        metas: dict[str, Mapping[str, object]] = {}
        for requested in dict.fromkeys(image_ids):
            meta = self.images.show(ctxt, requested)
            metas.setdefault(meta.id, meta.to_dict())
        image_ids = list(metas)
        pin_until = (None if pin_seconds is None else
                     models_utcnow() + datetime.timedelta(seconds=int(pin_seconds)))
        owner = self.owner
        job = jobs.job_create(
            self.db, aggregate["id"], aggregate["uuid"], image_ids,
            len(aggregate["hosts"]), self.host, hosts=aggregate["hosts"], pin_until=pin_until,
            owner=owner.owner if owner else None,
            lease_expires_at=owner.lease_until() if owner else None,
            # A job that waits for its window catches up from its first opening on.
            catch_up_until=(owner.catch_up_until(period.opens.replace(tzinfo=None))
                            if owner else None),
            terms=checked,
        )
        if period.opens > now:
            opens = period.opens.replace(tzinfo=None)
            jobs.job_schedule(self.db, job["uuid"], opens)
            LOG.info("Image pre-cache job %s on aggregate %s waits for its window: it starts "
                     "at %s", job["uuid"], aggregate_id, job_terms.format_instant(opens))
            return {**job, "state": jobs.SCHEDULED, "next_start_at": opens}
        PrecacheJob(self, ctxt, aggregate, job, aggregate["hosts"], metas).launch()
        return job

    def plan_hosts(self, aggregate: AggregateDict, hosts: list[str],
                   metas: Mapping[str, Mapping[str, object]]) -> list[HostPlan]:
        """Plan ``hosts`` of the aggregate: their services in one query, and which images
        they cannot use (``metas``: image id -> the image service's record); with peers,
        their image servers and the images their cache reports hold."""
        by_host = compute_states(self.db, hosts, binaries.COMPUTE)
        unsupported = (self.image_support.unsupported(aggregate["uuid"], hosts, dict(metas))
                       if self.image_support is not None else {})
        if self.quarantine is None:
            return [HostPlan(h, by_host.get(h), unsupported.get(h, {})) for h in hosts]
        sites = peer_sites(self.db, hosts, binaries.COMPUTE)
        holders = self._holders(hosts, metas)
        return [HostPlan(h, by_host.get(h), unsupported.get(h, {}), sites.get(h),
                         frozenset(i for i, held in holders.items() if h in held))
                for h in hosts]

    def images_held(self, hosts: list[str], image_ids: list[str]) -> Mapping[str, int]:
        """How many of ``image_ids`` each of ``hosts`` holds by its last cache report (hosts
        that hold none are left out): one query per image."""
        held: collections.Counter[str] = collections.Counter()
        for holding in self._holders(hosts, image_ids).values():
            held.update(holding)
        return held

    def _holders(self, hosts: list[str], image_ids: Iterable[str]) -> dict[str, set[str]]:
        """Image id -> those of ``hosts`` whose last cache report holds it: one query per
        image."""
        return {i: host_images.hosts_with_image(self.db, i, hosts) for i in image_ids}
