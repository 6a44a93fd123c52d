"""No job lost: leases on pre-cache jobs, renewed by their conductor, claimed by another.

Every conductor runs two periodic tasks (``fleetcache.cmd.conductor``):

* :meth:`JobTakeover.renew`, every third of ``[conductor] job_lease_time``: one ``UPDATE``
  extends the leases of all jobs this process owns.
* :meth:`JobTakeover.claim`, every ``[conductor] job_takeover_interval``: jobs whose lease
  expired are claimed atomically (:func:`~fleetcache.common.db.job_leases.job_claim`, a
  compare-and-set ``UPDATE``: of several conductors exactly one wins) and carried on. At
  start-up the same pass also claims the jobs of this host's previous conductor process,
  whatever their lease, so a lone conductor that restarts resumes its own jobs at once.

So a job whose conductor is killed is carried on by another within ``job_lease_time +
job_takeover_interval`` seconds (plus the time to re-plan its hosts).

Carrying on a job (:meth:`JobTakeover.resume`): a ``queued`` or ``running`` job's first pass is
run again for the hosts without any stored result only; hosts with a stored result, final or
``pending``, are not asked again. A ``catching_up`` job needs nothing more: catch-up
(:mod:`fleetcache.conductor.precache.catchup`) serves the jobs this conductor owns.

What a ``kill -9`` loses: results are stored in batches (``results.ResultWriter``, at most
``linger`` = 0.2 s or 200 hosts per transaction), so the hosts whose answers were in the
unflushed batch, and those whose calls were in flight, have no stored result. The next owner
asks them again. ``cache_images`` is idempotent: a host that finished its download answers
``existing``, one still downloading makes the second request wait on its per-image lock and
answers ``existing`` too; nothing is downloaded twice. Results are rows unique per (job, host,
image), replaced, never added, so nothing is counted twice; what is lost is only that such a
host shows ``existing`` (and 0 bytes) where its first answer would have said ``cached``.
"""

from __future__ import annotations

import logging

from fleetcache.common import exception
from fleetcache.common.context import RequestContext, get_admin_context
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import job_leases, jobs
from fleetcache.common.db.models import utcnow
from fleetcache.conductor.precache.job import PrecacheJob
from fleetcache.conductor.precache.ownership import JobOwner
from fleetcache.conductor.precache.precacher import Precacher

LOG = logging.getLogger(__name__)


class JobTakeover:
    """Renews this conductor's leases and takes over jobs whose conductor died.

    :param precacher: runs the first pass of a job taken over (its pools, clients, notifier).
    :param owner: this conductor process as a job owner.
    """

    def __init__(self, precacher: Precacher, owner: JobOwner) -> None:
        self.precacher = precacher
        self.db = precacher.db
        self.owner = owner
        self._started = False

    def renew(self) -> None:
        """Extend the leases of every job this process owns (one ``UPDATE``)."""
        job_leases.jobs_renew(self.db, self.owner.owner, self.owner.lease_until())

    def run_once(self) -> None:
        """The periodic task: :meth:`claim`."""
        self.claim()

    def claim(self) -> list[str]:
        """Claim and carry on every job whose lease expired (the first call also claims this
        host's earlier conductor's jobs). :returns: the uuids of the jobs taken over."""
        own_host = None if self._started else self.owner.host
        self._started = True
        taken = []
        for seen in job_leases.jobs_claimable(self.db, utcnow(), self.owner.owner, own_host):
            if not job_leases.job_claim(self.db, seen, self.owner.owner, self.owner.host,
                                        self.owner.lease_until()):
                continue
            LOG.warning("Took over image pre-cache job %s (%s) from %s, whose lease %s",
                        seen.job_uuid, seen.state, seen.owner or "no conductor",
                        f"expired at {seen.expires_at}" if seen.expires_at else "was unset")
            taken.append(seen.job_uuid)
            try:
                self.resume(seen.job_uuid)
            except Exception:
                LOG.exception("Could not carry on image pre-cache job %s", seen.job_uuid)
                job_leases.job_end_first_pass(
                    self.db, seen.job_uuid, error="could not be carried on after a takeover")
        return taken

    def resume(self, job_uuid: str, ctxt: RequestContext | None = None) -> None:
        """Carry on a job just claimed: its first pass over the hosts without a result."""
        job = jobs.job_get(self.db, job_uuid)
        if job["state"] in (jobs.CATCHING_UP, jobs.SCHEDULED):
            return  # catch-up serves it from now on, or its window starts it (windows.py)
        carry_on(self.precacher, job, ctxt)


def carry_on(precacher: Precacher, job: jobs.JobDict, ctxt: RequestContext | None = None) -> None:
    """Run a job's first pass again for its hosts without a final result: after a takeover,
    or when its next window opens (:mod:`~.windows`)."""
    db, job_uuid = precacher.db, job["uuid"]
    ctxt = ctxt or get_admin_context()
    try:
        aggregate = db_aggregates.aggregate_get_by_uuid(db, job["aggregate_uuid"])
    except exception.AggregateNotFound:
        job_leases.job_end_first_pass(db, job_uuid,
                                      error="its aggregate was deleted before it was carried on")
        return
    hosts = job_leases.job_unfinished_hosts(db, job_uuid, aggregate["hosts"])
    done_before = len({r["host"] for r in job["results"]} - set(hosts))
    LOG.info("Image pre-cache job %s: %d host(s) to ask again, %d with results",
             job_uuid, len(hosts), done_before)
    metas = {i: precacher.images.show(ctxt, i).to_dict() for i in job["image_ids"]}
    # A job that ran before sent its start notification then; a queued one's never did.
    # Its end notification comes from this run either way.
    PrecacheJob(precacher, ctxt, aggregate, job, hosts, metas,
                done_before=done_before, resumed=job["started_at"] is not None).launch()
