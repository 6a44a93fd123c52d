"""Jobs that wait for their window: started when it opens, ended at their deadline.

A job whose request has a ``not_before`` or a daily ``window`` (:mod:`fleetcache.common.job_terms`)
is ``scheduled`` while it is outside them, with ``next_start_at`` stored in its row: at
creation (:meth:`~.precacher.Precacher.start`) and each time a window closes under it
(:class:`~.job.PrecacheJob` cuts its calls at the window's end and leaves the hosts it did
not finish for the next one). Every conductor runs :meth:`JobWindows.run_once` every
``[conductor] job_window_interval`` seconds: the jobs it owns whose time has come are carried
on (:func:`~.takeover.carry_on`: the hosts without a final result), and those whose deadline
passed while they waited end ``done``, the hosts without a final result ``skipped``.

A scheduled job is owned and leased like a running one, so a conductor that dies leaves it
to another (:mod:`~.takeover`), which starts it in its turn: the window is in the job's row,
not in a process.
"""

from __future__ import annotations

import datetime
import logging

from fleetcache.common import job_terms
from fleetcache.common.context import get_admin_context
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import job_leases, jobs
from fleetcache.common.db.models import utcnow
from fleetcache.conductor.precache import notifications
from fleetcache.conductor.precache.ownership import JobOwner
from fleetcache.conductor.precache.precacher import Precacher
from fleetcache.conductor.precache.takeover import carry_on

LOG = logging.getLogger(__name__)

#: Seconds before a job that could not be started in its window is tried again.
RETRY_SECONDS = 30


class JobWindows:
    """Starts this conductor's scheduled jobs when their window opens.

    :param precacher: runs the jobs (its pools, clients, notifier).
    :param owner: this conductor process as a job owner: it starts only its own jobs.
    """

    def __init__(self, precacher: Precacher, owner: JobOwner) -> None:
        self.precacher = precacher
        self.owner = owner

    def run_once(self) -> None:
        """The periodic task: :meth:`start_due`."""
        self.start_due()

    def start_due(self) -> list[str]:
        """Start or end every job of this conductor whose time has come. :returns: them."""
        handled = []
        for job_uuid in jobs.jobs_due(self.precacher.db, self.owner.owner, utcnow()):
            try:
                if self.start(job_uuid):
                    handled.append(job_uuid)
            except Exception:
                # NOTE: a failure here is most likely passing (the image service answering
                # 503 to the images' look-up, the conductor stopping): the job is left
                # scheduled and tried again, not failed for good.
                LOG.exception("Could not start image pre-cache job %s in its window; trying "
                              "again in %d s", job_uuid, RETRY_SECONDS)
                jobs.job_schedule(self.precacher.db, job_uuid,
                                  utcnow() + datetime.timedelta(seconds=RETRY_SECONDS),
                                  owner=self.owner.owner)
        return handled

    def start(self, job_uuid: str) -> bool:
        """Carry on a due job, or end it when no window opens before its deadline.

        :returns: whether it did (False: another look, or another conductor, had it).
        """
        db, owner = self.precacher.db, self.owner.owner
        now = datetime.datetime.now(datetime.UTC)
        job = jobs.job_get(db, job_uuid)
        period = job_terms.next_period(job["terms"], now)
        if period is not None and period.opens > now:  # computed on another conductor's clock
            jobs.job_schedule(db, job_uuid, period.opens.replace(tzinfo=None), owner=owner)
            return False
        if not jobs.job_claim_due(db, job_uuid, owner):
            return False
        if period is None:
            settled = job_leases.job_end_at_deadline(db, job_uuid, job["hosts"] or [],
                                                     now.replace(tzinfo=None), owner=owner)
            LOG.info("Image pre-cache job %s: its deadline passed while it waited for its "
                     "window; %d result(s) skipped", job_uuid, settled)
            if job["started_at"] is not None:  # a job never started sent no start either
                self._notify_end(job)
            return True
        LOG.info("Image pre-cache job %s: its window is open until %s", job_uuid,
                 "its end" if period.closes is None else job_terms.format_instant(period.closes))
        carry_on(self.precacher, job)
        return True

    def _notify_end(self, job: jobs.JobDict) -> None:
        try:
            aggregate = db_aggregates.aggregate_get_by_uuid(self.precacher.db,
                                                            job["aggregate_uuid"])
        except Exception:  # a deleted aggregate: nobody follows the job by it any more
            return
        self.precacher.notifier.end(get_admin_context(), notifications.end_payload(
            aggregate, job["uuid"],
            jobs.job_distribution(jobs.job_get(self.precacher.db, job["uuid"]))))
