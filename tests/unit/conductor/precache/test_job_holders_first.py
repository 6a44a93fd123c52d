"""With peers, a job run calls the hosts whose cache reports hold more of its images first
(a run after the first, the hosts an earlier run cached): they are sources for the hosts
that lack the images, which would otherwise take their group's image service slot for a
second copy. Stable otherwise; without peers the hosts are called in the aggregate's order."""

from __future__ import annotations

import pytest

from fleetcache.common.db import host_images, jobs
from fleetcache.conductor.precache import job as precache
from fleetcache.conductor.precache.peers import PeerQuarantine
from tests.unit.conductor.precache.test_job import (
    IMG_A,
    IMG_B,
    FakeComputes,
    _ctxt,
    make_aggregate,
    make_precacher,
    pools,  # noqa: F401 - the fixture
)

HOSTS = ["h0", "h1", "h2", "h3", "h4"]


def report(db, host: str, *image_ids: str) -> None:
    host_images.set_host_images(
        db, host, [{"image_id": i, "size": 1, "last_used": 1.0} for i in image_ids], 1)


@pytest.mark.parametrize(("peers", "order"), [
    (True, ["h3", "h1", "h4", "h0", "h2"]),
    (False, HOSTS),
])
def test_hosts_holding_more_of_the_jobs_images_are_called_first_with_peers(
        conf, db, pools, monkeypatch, peers, order):  # noqa: F811 - the fixture
    monkeypatch.setattr(precache, "LOOKUP_PAGE", 2)  # the order spans pages
    conf.set_override("precache_concurrency", 1, group="image_cache")
    agg_id = make_aggregate(db, HOSTS)
    report(db, "h1", IMG_A)
    report(db, "h3", IMG_A, IMG_B)
    report(db, "h4", IMG_B, "not-in-the-job")
    computes = FakeComputes()
    precacher = make_precacher(conf, db, computes, pools)
    precacher.quarantine = PeerQuarantine(60) if peers else None

    job = precacher.start(_ctxt(), agg_id, [IMG_A, IMG_B])

    assert jobs.job_get(db, job["uuid"])["state"] == jobs.DONE
    assert [host for host, _ in computes.calls] == order
