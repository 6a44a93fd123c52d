"""A job's terms on the real stack (issue 23, "Rollouts on the operator's terms"): Keystone,
the API, the conductor, three computes in two cells, and Glance's own access log as the judge.

* A job posted outside its daily window is ``scheduled`` and starts when the window opens,
  its conductor restarted meanwhile: Glance serves none of its downloads before then.
* A window that closes mid-download cuts it (compute RPC 1.5's end time): the host waits,
  its bytes kept; the next window finishes it with a Range request, so Glance sends the
  image about once (at most one chunk more).
* A deadline ends the job with what it reached: hosts cut by it, or not asked, are
  ``skipped`` saying so.
* A per-job rate of R bytes/s over three hosts: Glance's view of the job (bytes over the time
  from its first GET's start to its last one's end) stays within 10 % of R.

The next day's window is not waited for: the test brings it forward in the job's row (its
terms without the window, ``next_start_at`` now), which is what the conductor reads when a
window opens.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

import pytest
from sqlalchemy import update

from fleetcache.common.db import jobs, models
from tests.integration.glance_log import most_counted_for_cut
from tests.integration.stackops import (
    MV,
    cached_file,
    file_gets,
    file_sha512,
    get_job,
    raw_image,
    wait_job_done,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

HOSTS = ("compute1", "compute2", "compute3")
MIB = 1 << 20
#: The terms keys need fleetcache's own API version 1.1 beside Nova's 2.81.
VERSIONS = f"compute {MV}, fleetcache 1.1"
UTC = datetime.UTC


def _random(mib: int) -> Any:
    return (os.urandom(MIB) for _ in range(mib))


def post_job(stack: Any, agg_id: int, image_id: str, **terms: Any) -> str:
    """Ask for ``image_id`` on the aggregate with ``terms`` (``fleetcache:<key>``)."""
    body = {"cache": [{"id": image_id}], **{f"fleetcache:{k}": v for k, v in terms.items()}}
    resp = stack.api_request("POST", f"os-aggregates/{agg_id}/images", json=body,
                             headers={"OpenStack-API-Version": VERSIONS})
    assert resp.status_code == 202, resp.text
    return str(resp.headers["Location"].rsplit("/", 1)[-1])


def clock(at: datetime.datetime) -> str:
    return at.astimezone(UTC).strftime("%H:%M:%S")


def api_time(value: str) -> datetime.datetime:
    """A time as the API shows it (UTC, without an offset), aware."""
    parsed = datetime.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def images_of(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["host"]: h["images"][0] for h in job["hosts"]}


def bring_next_window_forward(stack: Any, job_id: str, terms: dict[str, Any]) -> None:
    """The job's next window, now: its terms without the window, its start now."""
    with stack.db.transaction() as session:
        session.execute(update(models.CacheJob).where(models.CacheJob.uuid == job_id)
                        .values(terms=terms))
    jobs.job_schedule(stack.db, job_id, models.utcnow())


def test_a_job_posted_outside_its_window_starts_when_it_opens(stack, make_aggregate):
    """... even when its conductor restarts while the job waits (the new process takes the
    job over and starts it in its turn)."""
    agg = make_aggregate(hosts=HOSTS)
    with raw_image(stack, _random(4), "it-window-opens") as image:
        opens = (datetime.datetime.now(UTC) + datetime.timedelta(seconds=40)).replace(
            microsecond=0)
        window = {"start": clock(opens), "end": clock(opens + datetime.timedelta(minutes=10)),
                  "timezone": "UTC"}
        job_id = post_job(stack, agg["id"], image["id"], window=window)

        job = get_job(stack, agg["id"], job_id)
        assert job["state"] == "scheduled", job
        assert api_time(job["next_start_at"]) == opens, job
        assert job["terms"]["window"] == window
        stack.restart_conductor()
        assert datetime.datetime.now(UTC) < opens - datetime.timedelta(seconds=3), \
            "the restart took too long for this test's window"
        wait_for(lambda: datetime.datetime.now(UTC) >= opens - datetime.timedelta(seconds=2),
                 "the window's opening to come near", 60)
        assert file_gets(stack, image["id"]) == []
        assert get_job(stack, agg["id"], job_id)["state"] == "scheduled"

        done = wait_job_done(stack, agg["id"], job_id, timeout=90)

        assert done["state"] == "done", done
        assert {h: i["state"] for h, i in images_of(done).items()} == dict.fromkeys(
            HOSTS, "cached")
        gets = file_gets(stack, image["id"], at_least=3)
        assert len(gets) == 3
        first = min(g.started for g in gets if g.started is not None)
        print(f"\nwindow opened at {opens.timestamp():.3f}, first GET at {first:.3f}")
        assert opens.timestamp() <= first <= opens.timestamp() + 10


def test_a_window_that_closes_pauses_the_download_and_the_next_finishes_it(
        stack, make_aggregate):
    host, size_mib = "compute1", 32
    agg = make_aggregate(hosts=(host,))
    with raw_image(stack, _random(size_mib), "it-window-closes") as image:
        now = datetime.datetime.now(UTC)
        window = {"start": clock(now - datetime.timedelta(minutes=1)),
                  "end": clock(now + datetime.timedelta(seconds=4)), "timezone": "UTC"}
        rate = 4 * MIB  # 8 s for the image: the window's close cuts it half way
        job_id = post_job(stack, agg["id"], image["id"], window=window,
                          host_bytes_per_second=rate)

        def paused() -> dict[str, Any] | None:
            job = get_job(stack, agg["id"], job_id)
            return job if job["state"] == "scheduled" else None

        job = wait_for(paused, "the window's close to pause the job", 30)
        result = images_of(job)[host]
        assert result["state"] == "waiting", job
        assert "paused at the end of the job's window" in result["reason"]
        kept = result["bytes_downloaded"]
        assert 0 < kept < size_mib * MIB, result
        assert not cached_file(stack, host, image["id"]).exists()
        next_start = api_time(job["next_start_at"])
        assert next_start - now > datetime.timedelta(hours=23)

        bring_next_window_forward(stack, job_id, {"host_bytes_per_second": rate})
        done = wait_job_done(stack, agg["id"], job_id, timeout=60)

        assert done["state"] == "done", done
        result = images_of(done)[host]
        assert (result["state"], result["bytes_downloaded"]) == ("cached", size_mib * MIB)
        assert file_sha512(cached_file(stack, host, image["id"])) == image["os_hash_value"]
        gets = file_gets(stack, image["id"], at_least=2)
        sent = sum(g.size for g in gets)
        print(f"\nkept {kept} bytes at the close; Glance sent {sent} bytes in {len(gets)} GETs "
              f"for a {size_mib * MIB}-byte image")
        assert len(gets) == 2
        first, rest = sorted(gets, key=lambda g: g.started or 0)
        # The second GET asked for exactly what was not kept...
        assert (rest.status, rest.size) == (206, size_mib * MIB - kept), rest
        # ...and Glance counts a cut GET's bytes by its store's chunks: the image crossed
        # the link once, but for what the kernels held at the cut, within the chunk Glance
        # was writing (a run counted 20 MiB for 15.3 MiB kept: the 4th chunk and the 5th).
        assert first.size <= most_counted_for_cut(kept), first


def test_a_deadline_ends_the_job_with_the_rest_skipped(stack, make_aggregate):
    agg = make_aggregate(hosts=HOSTS)
    with raw_image(stack, _random(32), "it-deadline") as image:
        deadline = datetime.datetime.now(UTC) + datetime.timedelta(seconds=4)
        job_id = post_job(stack, agg["id"], image["id"], deadline=deadline.isoformat(),
                          host_bytes_per_second=4 * MIB)

        done = wait_job_done(stack, agg["id"], job_id, timeout=60)

        assert done["state"] == "done", done
        for host, result in images_of(done).items():
            assert result["state"] == "skipped", (host, result)
            assert "deadline" in result["reason"], (host, result)
            assert not cached_file(stack, host, image["id"]).exists()
        finished = api_time(done["finished_at"])
        assert finished - deadline < datetime.timedelta(seconds=10)


def test_a_job_rate_bounds_what_glance_sends_for_the_job(stack, make_aggregate):
    """The conductor calls the three hosts at once (``precache_concurrency`` 3): each gets a
    third of the job's rate."""
    size_mib, rate = 32, 6 * MIB
    agg = make_aggregate(hosts=HOSTS)
    with (stack.conductor_options("job-rate", "[image_cache]\nprecache_concurrency = 3\n"),
          raw_image(stack, _random(size_mib), "it-job-rate") as image):
        job_id = post_job(stack, agg["id"], image["id"], job_bytes_per_second=rate)

        done = wait_job_done(stack, agg["id"], job_id, timeout=120)

        assert done["state"] == "done", done
        assert {h: i["state"] for h, i in images_of(done).items()} == dict.fromkeys(
            HOSTS, "cached")
        gets = file_gets(stack, image["id"], at_least=3)
        assert len(gets) == 3 and all(g.started is not None for g in gets)
        sent = sum(g.size for g in gets)
        span = max(g.ended for g in gets) - min(g.started for g in gets)  # type: ignore
        seen = sent / span
        print(f"\nGlance sent {sent} bytes in {span:.2f} s: {seen / MIB:.2f} MiB/s for a job "
              f"rate of {rate / MIB:.2f} MiB/s ({seen / rate:.3f} of it); per GET: "
              + ", ".join(f"{g.size / g.seconds / MIB:.2f}" for g in gets))
        assert sent == 3 * size_mib * MIB
        assert abs(seen - rate) <= 0.10 * rate
        starts = sorted(g.started for g in gets)  # type: ignore[type-var]
        assert starts[-1] - starts[0] < 2, "the three hosts were not called at once"
