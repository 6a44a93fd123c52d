"""Who this conductor process is, for the jobs it owns: its owner id and lease terms.

One :class:`JobOwner` is built per conductor process at start-up. Its id is the host name plus
a uuid of this start, so that a restarted conductor on the same host is a different owner
(and takes over its predecessor's jobs: :mod:`fleetcache.conductor.precache.takeover`).
"""

from __future__ import annotations

import dataclasses
import datetime

from oslo_config import cfg
from oslo_utils import uuidutils

from fleetcache.common.db import models


@dataclasses.dataclass(frozen=True)
class JobOwner:
    """The owner id and lease terms of one conductor process.

    :param host: the conductor's ``[DEFAULT] host``.
    :param owner: ``<host>:<uuid of this process start>``.
    :param lease_time: seconds a lease lasts unrenewed (``[conductor] job_lease_time``).
    :param catch_up_window: seconds of catch-up after a job's creation, 0 for none
        (``[image_cache] catch_up_window``).
    """

    host: str
    owner: str
    lease_time: float
    catch_up_window: float

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> JobOwner:
        return cls(host=conf.host, owner=f"{conf.host}:{uuidutils.generate_uuid()}",
                   lease_time=conf.conductor.job_lease_time,
                   catch_up_window=conf.image_cache.catch_up_window)

    def lease_until(self, now: datetime.datetime | None = None) -> datetime.datetime:
        return (now or models.utcnow()) + datetime.timedelta(seconds=self.lease_time)

    def catch_up_until(self, now: datetime.datetime | None = None) -> datetime.datetime | None:
        """The end of a new job's catch-up window; None when catch-up is off."""
        if self.catch_up_window <= 0:
            return None
        return (now or models.utcnow()) + datetime.timedelta(seconds=self.catch_up_window)
