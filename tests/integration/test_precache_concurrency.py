"""Two pre-cache jobs for the same image on the same aggregate at once, on the real stack: each
host fetches the image from Glance once (issue 3, "Verified by").

The conductor is restarted with ``[image_cache] precache_concurrency`` = 2 x hosts for the test,
so both jobs' calls reach each compute at the same time (at the stack's default of 1 the shared
pool would serialize them and the second job would only find the first one's file). What
happened is read from three independent records:

* Glance's access log: the ``GET /v2/images/<id>/file`` lines, each tagged with the
  ``X-OpenStack-Request-ID`` the compute sent (the job's global request id, which the test
  chose when it posted the job);
* the job resources: per host, one job ``cached``, the other ``existing``;
* the computes' logs: the second job asked for the image's lock while the first job held it
  for its download, so the two requests really overlapped on every host.
"""

from __future__ import annotations

import collections
import concurrent.futures
import datetime
import os
import re
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from fleetcache.compute.imagecache import cache_name
from tests.integration.stackops import (
    MV,
    cached_file,
    file_gets,
    file_sha512,
    raw_image,
    wait_job_done,
)

pytestmark = pytest.mark.integration

HOSTS = ("compute1", "compute3")  # one in each cell
JOBS = 2
CONCURRENCY = JOBS * len(HOSTS)  # every call of both jobs in flight at once
IMAGE_MIB = 256  # a download of a second or more: a wide window for the second job to arrive
STATES = ("cached", "existing")


@pytest.fixture
def fresh_image(stack: Any) -> Iterator[dict[str, Any]]:
    """A new raw image of IMAGE_MIB random MiB in the stack's Glance (so no compute has it),
    deleted, with its cached copies, after the test. :returns: Glance's image body."""
    chunks = (os.urandom(1 << 20) for _ in range(IMAGE_MIB))
    with raw_image(stack, chunks, "it-concurrent") as body:
        assert body["status"] == "active" and body["size"] == IMAGE_MIB << 20, body
        yield body


@pytest.fixture
def wide_conductor(stack: Any) -> Iterator[None]:
    """The stack's conductor, restarted with ``precache_concurrency = CONCURRENCY``."""
    with stack.conductor_options(
            "precache-concurrency", f"[image_cache]\nprecache_concurrency = {CONCURRENCY}\n"):
        yield


def _post_at_once(stack: Any, agg_id: int, image_id: str,
                  request_ids: list[str]) -> list[requests.Response]:
    """POST one cache request per request id, all released at the same instant."""
    barrier = threading.Barrier(len(request_ids))

    def post(request_id: str) -> requests.Response:
        barrier.wait()
        resp: requests.Response = stack.api_request(
            "POST", f"os-aggregates/{agg_id}/images", microversion=MV,
            headers={"X-OpenStack-Request-ID": request_id}, json={"cache": [{"id": image_id}]})
        return resp

    with concurrent.futures.ThreadPoolExecutor(len(request_ids)) as pool:
        return list(pool.map(post, request_ids))


_LOCK_LINE = re.compile(
    r"^(?P<stamp>\S+ \S+) \d+ DEBUG oslo_concurrency\.lockutils \[(?P<global_id>\S+) "
    r'.*\] (?P<event>Acquiring|Releasing) lock "(?P<name>[0-9a-f]+)"')


def _lock_events(stack: Any, host: str, image_id: str) -> dict[tuple[str, str], datetime.datetime]:
    """(global request id, Acquiring|Releasing) -> when it first happened for the image's lock,
    from the compute's log (``debug = true`` on the stack)."""
    first: dict[tuple[str, str], datetime.datetime] = {}
    for line in stack.log_file(host).read_text().splitlines():
        match = _LOCK_LINE.match(line)
        if match is None or match["name"] != cache_name(image_id):
            continue
        stamp = datetime.datetime.strptime(match["stamp"], "%Y-%m-%d %H:%M:%S.%f")
        first.setdefault((match["global_id"], match["event"]), stamp)
    return first


def test_two_jobs_at_once_fetch_the_image_from_glance_once_per_host(
        stack, wide_conductor, make_aggregate, fresh_image):
    image_id = fresh_image["id"]
    for host in HOSTS:
        stack.wait_service_state(host, up=True)
    agg = make_aggregate(hosts=HOSTS)
    assert not any(cached_file(stack, h, image_id).exists() for h in stack.computes)
    request_ids = [f"req-{uuid.uuid4()}" for _ in range(JOBS)]

    responses = _post_at_once(stack, agg["id"], image_id, request_ids)
    assert [r.status_code for r in responses] == [202] * JOBS, [r.text for r in responses]
    # Both jobs were accepted before any host had finished its download.
    assert not any(cached_file(stack, h, image_id).exists() for h in HOSTS)
    job_ids = [r.headers["Location"].rsplit("/", 1)[-1] for r in responses]
    assert len(set(job_ids)) == JOBS
    done = [wait_job_done(stack, agg["id"], job_id, timeout=300) for job_id in job_ids]

    # The jobs: every host has the image; per host exactly one job downloaded it.
    cached_by: dict[str, list[str]] = {host: [] for host in HOSTS}
    for request_id, job in zip(request_ids, done, strict=True):
        assert job["state"] == "done", job
        states = {h["host"]: h["images"] for h in job["hosts"]}
        assert sorted(states) == sorted(HOSTS), job
        for host, images in states.items():
            assert [(i["image_id"], i["state"] in STATES) for i in images] == [
                (image_id, True)], (host, images)
            if images[0]["state"] == "cached":
                cached_by[host].append(request_id)
    assert {host: len(ids) for host, ids in cached_by.items()} == {h: 1 for h in HOSTS}

    # Glance: one GET of the image data per host, by the job that reported it cached.
    gets = file_gets(stack, image_id, at_least=len(HOSTS))
    assert len(gets) == len(HOSTS), gets
    assert {(g.status, g.size) for g in gets} == {(200, fresh_image["size"])}, gets
    assert collections.Counter(g.request_id for g in gets) == collections.Counter(
        ids[0] for ids in cached_by.values()), (gets, cached_by)

    # The computes: on each host the other job asked for the image's lock while the
    # downloading job still held it, i.e. the two requests overlapped during the download.
    for host in HOSTS:
        downloader = cached_by[host][0]
        waiter = next(i for i in request_ids if i != downloader)
        events = _lock_events(stack, host, image_id)
        assert (downloader, "Releasing") in events and (waiter, "Acquiring") in events, (
            host, events)
        assert events[(waiter, "Acquiring")] < events[(downloader, "Releasing")], (host, events)

    for host in HOSTS:
        assert file_sha512(cached_file(stack, host, image_id)) == fresh_image["os_hash_value"]
    assert not cached_file(stack, "compute2", image_id).exists()  # not in the aggregate
