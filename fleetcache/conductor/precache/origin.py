"""Origin protection: how many hosts download from the image service at once, across every
conductor (``[image_cache] max_concurrent_downloads_per_image`` and
``max_concurrent_downloads``).

Where it is enforced: **in the conductor, before it calls a host**. A pre-cache job with a
limit asks each host for one image at a time, each call under a download lease of
:mod:`fleetcache.common.db.download_leases` (a database row with an expiry, taken in a
transaction that is atomic on PostgreSQL, MariaDB and SQLite). Why there and not in the
compute:

* a host waiting for a slot has not been called, so there is no RPC call to time out and no
  compute worker (``[compute] max_concurrent_long_calls``) held while it waits;
* only the conductors' host-call workers wait (``precache_concurrency`` per conductor, each
  polling one short transaction every second or two), where a compute-side wait would have
  every host of a 1,000-host job polling the conductor over RPC;
* the computes keep holding no database credentials and need no new RPC.

The price: a host that already has the image takes a slot for the length of a cache hit (a
few milliseconds), and a download that will come from Ceph (``rbd://``) takes one although it
does not load the image service, because only the compute knows which path it takes. Instance
disks (``create_instance_disk``) are not counted: the scheduler places one instance at a time.

The conductor renews the leases of its calls in flight every third of ``[image_cache]
download_lease_seconds``, so a conductor that dies (``kill -9``) frees its slots within that
time. A host waiting for a slot is stored ``waiting`` in its job, with the limit that is full
(or the priority that goes first).

Priority: a waiting host is registered, with its job's priority, as a waiter of the leases
(refreshed at each attempt, removed when it gets its lease or stops waiting), and a slot
goes to the highest priority waiting for it, across conductors; among equal priorities it
goes to whichever attempts first, as without priorities
(:mod:`fleetcache.common.db.download_leases`).

Built once per conductor (:class:`~fleetcache.conductor.manager.ConductorState`)::

    gate = DownloadGate.from_conf(conf, db)   # holder "<host>/<pid>"
    with gate.hold(host, image_id, job_uuid, on_wait=show, stopping=pool.stopping,
                   priority=80):
        compute.cache_images(ctxt, host, [image_id])
    gate.stop()
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
from collections.abc import Callable, Iterator

import sqlalchemy.exc
from oslo_config import cfg

from fleetcache.common import job_terms
from fleetcache.common.db import download_leases
from fleetcache.common.db.download_leases import Limits
from fleetcache.common.db.session import Database

LOG = logging.getLogger(__name__)

#: Seconds between two attempts of a waiting host: the first, and the most.
FIRST_RETRY, MAX_RETRY = 0.2, 2.0


class GateClosed(RuntimeError):
    """The conductor is stopping while a host waited for a download slot."""


class WaitAbandoned(RuntimeError):
    """The host's job gave up waiting for a download slot (its window closed, its deadline
    came): the host is asked again in the job's next window, or ends at its deadline."""


class DownloadGate:
    """The conductor's side of the download leases: take, renew, give back.

    :param holder: names this conductor process on its leases.
    :param lease_seconds: a lease's life; renewed every third of it while held.
    """

    def __init__(self, db: Database, holder: str, limits: Limits,
                 lease_seconds: float) -> None:
        self.db = db
        self.holder = holder
        self.limits = limits
        self.lease_seconds = float(lease_seconds)
        self._held: set[int] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._renewer: threading.Thread | None = None
        if limits.enabled:
            self._renewer = threading.Thread(target=self._renew_loop, daemon=True,
                                             name="download-lease-renewer")
            self._renewer.start()

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts, db: Database) -> DownloadGate:
        """The gate of the conductor on ``conf.host``, holding leases as ``<host>/<pid>``.

        The leases a previous conductor process on this host left are released first (as
        its unfinished jobs are marked interrupted): that process is gone.
        """
        opts = conf.image_cache
        released = download_leases.leases_release_holders(db, f"{conf.host}/")
        if released:
            LOG.warning("Released %d download lease(s) a previous conductor on %s held",
                        released, conf.host)
        return cls(db, f"{conf.host}/{os.getpid()}",
                   Limits(per_image=opts.max_concurrent_downloads_per_image,
                          total=opts.max_concurrent_downloads),
                   opts.download_lease_seconds)

    @property
    def enabled(self) -> bool:
        """Whether any limit is set (without one, jobs call each host once for all images)."""
        return self.limits.enabled

    @contextlib.contextmanager
    def hold(self, host: str, image_id: str, job_uuid: str | None = None,
             on_wait: Callable[[str], None] | None = None,
             stopping: threading.Event | None = None, *,
             priority: int = job_terms.DEFAULT_PRIORITY,
             give_up: Callable[[], bool] | None = None) -> Iterator[None]:
        """Run the body under a lease for ``host``'s download of ``image_id``, waiting for a
        free slot first (no limit set: at once).

        :param on_wait: called once, with the reason (the full limit, or the higher priority
            that goes first), when the host has to wait.
        :param stopping: set when the conductor stops; the wait then ends.
        :param priority: the job's priority: while the host waits, no host of a job of a
            lower priority, of any conductor, takes a slot it could take.
        :param give_up: asked after each refused attempt; True ends the wait.
        :raises GateClosed: when ``stopping`` (or :meth:`stop`) ended the wait.
        :raises WaitAbandoned: when ``give_up`` did.
        """
        if not self.enabled:
            yield
            return
        lease_id = self._acquire(host, image_id, job_uuid, on_wait, stopping, priority,
                                 give_up)
        try:
            yield
        finally:
            with self._lock:
                self._held.discard(lease_id)
            try:
                download_leases.lease_release(self.db, lease_id)
            except sqlalchemy.exc.SQLAlchemyError as exc:
                LOG.warning("Download lease %d not released (it lapses in %.0f s): %s",
                            lease_id, self.lease_seconds, exc)

    def stop(self) -> None:
        """Stop renewing (the leases still held lapse) and end every wait."""
        self._stopped.set()

    def _acquire(self, host: str, image_id: str, job_uuid: str | None,
                 on_wait: Callable[[str], None] | None,
                 stopping: threading.Event | None, priority: int,
                 give_up: Callable[[], bool] | None) -> int:
        delay, told = FIRST_RETRY, False
        waiter_id: int | None = None
        try:
            while True:
                grant = self._attempt(host, image_id, job_uuid, priority, waiter_id)
                if grant.lease_id is not None:
                    waiter_id = None  # deleted with the lease taken
                    with self._lock:
                        self._held.add(grant.lease_id)
                    return grant.lease_id
                if grant.waiter_id is not None:  # none when the database was busy
                    waiter_id = grant.waiter_id
                if not told and on_wait is not None:
                    told = True
                    LOG.info("Compute %s waits for a download slot of image %s: %s", host,
                             image_id, grant.reason)
                    on_wait(grant.reason or "")
                # Jitter so that the waiting workers of several conductors do not poll in
                # step.
                if self._wait(delay * random.uniform(0.5, 1.0), stopping):  # noqa: S311
                    raise GateClosed(f"the conductor stopped while {host} waited for a "
                                     f"download slot of image {image_id}")
                if give_up is not None and give_up():
                    raise WaitAbandoned(f"{host} stopped waiting for a download slot of "
                                        f"image {image_id}")
                delay = min(delay * 2, MAX_RETRY)
        finally:
            if waiter_id is not None:
                self._stop_waiting(waiter_id)

    def _attempt(self, host: str, image_id: str, job_uuid: str | None, priority: int,
                 waiter_id: int | None) -> download_leases.Grant:
        try:
            return download_leases.lease_acquire(
                self.db, self.holder, host, image_id, self.limits, self.lease_seconds,
                job_uuid, priority=priority, waiter_id=waiter_id)
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.IntegrityError) as exc:
            # A lock wait that timed out, or a racing first insert of the gate row.
            return download_leases.Grant(None, f"database busy: {type(exc).__name__}")

    def _stop_waiting(self, waiter_id: int) -> None:
        """Delete the waiter of a host that stopped waiting without a lease."""
        try:
            download_leases.waiter_release(self.db, waiter_id)
        except sqlalchemy.exc.SQLAlchemyError as exc:
            LOG.warning("Download waiter %d not deleted (it lapses in %.0f s): %s", waiter_id,
                        download_leases.WAITER_SECONDS, exc)

    def _wait(self, seconds: float, stopping: threading.Event | None) -> bool:
        """Sleep ``seconds``; :returns: whether the conductor is stopping."""
        if stopping is None:
            return self._stopped.wait(seconds)
        if stopping.wait(seconds):
            return True
        return self._stopped.is_set()

    def _renew_loop(self) -> None:
        while not self._stopped.wait(self.lease_seconds / 3):
            with self._lock:
                held = sorted(self._held)
            if not held:
                continue
            try:
                renewed = download_leases.leases_renew(self.db, self.holder, held,
                                                       self.lease_seconds)
            except sqlalchemy.exc.SQLAlchemyError as exc:
                LOG.warning("Download leases not renewed (they lapse in at most %.0f s): %s",
                            self.lease_seconds, exc)
                continue
            if renewed < len(held):
                LOG.warning("%d of %d download leases had lapsed before their renewal (the "
                            "database was unreachable for longer than a lease?)",
                            len(held) - renewed, len(held))
