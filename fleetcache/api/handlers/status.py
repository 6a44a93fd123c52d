"""``/status``: the status page of the fleet, and ``/status/progress``, the feed its script polls.

A fleetcache extension for operators in a browser: the newest pre-cache jobs with live
progress, a hosts x images matrix of their results with reasons, and each host's image cache
as it last reported it. Both are admin-only (``fleetcache:status:show``).

The page names aggregates (from the database, one query) and images (from the image source,
through the application's cache, :mod:`fleetcache.api.image_names`, waited on for at most
:data:`IMAGE_NAME_WAIT`): what has no name by then shows as its id.

How a browser authenticates (the page cannot set ``X-Auth-Token`` on a link) is
:mod:`fleetcache.api.status_auth`'s concern: with ``noauth`` the page simply loads; with
Keystone a token comes from a proxy that adds the header, or from the sign-in form.
"""

from __future__ import annotations

from typing import Any

import webob

from fleetcache.api import policy, status_html, util
from fleetcache.api.handlers import aggregate_images
from fleetcache.api.paths import STATUS, STATUS_PROGRESS
from fleetcache.api.policies import status as policies
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import host_images
from fleetcache.common.db import jobs as db_jobs

#: Jobs the page and the feed show, newest first. The matrix reads every result of these:
#: ten jobs of 1,000 hosts and 3 images are 30,000 rows, about what one page should cost.
RECENT_JOBS = 10
#: Seconds a render waits for image names it does not know yet. A Glance show takes tens of
#: milliseconds on a healthy service; a slow or dead one costs the page no more than this.
IMAGE_NAME_WAIT = 0.5


def _authorize(req: webob.Request) -> None:
    state = util.get_state(req)
    policy.authorize(state.enforcer, util.get_context(req), policies.SHOW)


def get_status(req: webob.Request) -> webob.Response:
    """Show the status page (HTML): jobs, hosts x images results, cache usage per host."""
    _authorize(req)
    state = util.get_state(req)
    db = state.db
    jobs = [aggregate_images.format_job(req, job, detail=True)
            for job in db_jobs.job_list_recent(db, RECENT_JOBS)]
    image_ids = [image_id for job in jobs for image_id in job["image_ids"]]
    caches: list[dict[str, Any]] = [
        {**cache, "reported_at": util.format_time(cache["reported_at"])}
        for cache in host_images.host_cache_list(db)
    ]
    view = status_html.StatusView(
        jobs=jobs, caches=caches,
        aggregate_names=db_aggregates.aggregate_names(db, (j["aggregate_uuid"] for j in jobs)),
        image_names=state.image_names.get(util.get_context(req), image_ids,
                                          wait=IMAGE_NAME_WAIT),
        progress_url=req.script_name + STATUS_PROGRESS,
        cookie_path=req.script_name + STATUS,
        token_cookie=status_html.TOKEN_COOKIE in req.cookies,
    )
    response = webob.Response(status=200, content_type="text/html", charset="UTF-8")
    response.headers.update(status_html.HEADERS)
    response.text = status_html.render_page(view)
    return response


def get_status_progress(req: webob.Request) -> webob.Response:
    """Show the progress of the status page's jobs (JSON), newest first."""
    _authorize(req)
    progress = db_jobs.job_progress_recent(util.get_state(req).db, RECENT_JOBS)
    response = util.json_response({"jobs": [
        {"id": p["uuid"], "state": p["state"], "total_hosts": p["total_hosts"],
         "hosts_reported": p["hosts_reported"], "counts": p["counts"]}
        for p in progress
    ]})
    response.headers["Cache-Control"] = "no-store"
    return response
