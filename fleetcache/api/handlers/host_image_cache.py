"""``GET /os-hosts/{host}/image-cache``: the images a compute reported in its image cache.

A fleetcache extension (Nova has no such resource): what ``fleetcache cache list HOST`` shows.
It reads the compute's last cache report (:mod:`fleetcache.common.db.host_images`), sent after
every ageing pass and pre-cache request, so it is as fresh as that report (``reported_at``),
not a live look at the host's disk.

Each image carries ``pinned_until``: until when a pre-cache request with
``"fleetcache:pin_seconds"`` pinned it on the host (the ageing pass keeps it until then), as
the compute reported it; ``null`` when it is not pinned, or no longer (a pin that ended since
the report is not shown). ``pending_catch_ups`` lists the unfinished jobs in which the host is
``pending`` (it was down, disabled or added to the aggregate later): their images are cached
when it comes back, until the job's catch-up window closes (``until``).

A host with a compute service that has not reported yet answers ``reported_at: null`` and no
image; a host with neither is 404.
"""

from __future__ import annotations

import datetime
from typing import Any

import webob

from fleetcache.api import policy, util
from fleetcache.api.policies import host_image_cache as policies
from fleetcache.common import binaries, exception
from fleetcache.common.db import host_images, jobs
from fleetcache.common.db import services as db_services
from fleetcache.common.db.models import utcnow

#: The longest host name the database stores.
MAX_HOST_LENGTH = 255


def list_host_image_cache(req: webob.Request) -> webob.Response:
    """List the images a compute host reported in its image cache."""
    state = util.get_state(req)
    policy.authorize(state.enforcer, util.get_context(req), policies.LIST)
    host = req.urlvars["host"]
    if not 0 < len(host) <= MAX_HOST_LENGTH:
        raise exception.ComputeHostNotFound(host=host[:MAX_HOST_LENGTH])
    summary, images = host_images.host_cache_get(state.db, host)
    if summary is None and not db_services.service_list(state.db, binaries.COMPUTE, hosts=[host]):
        raise exception.ComputeHostNotFound(host=host)
    pending = jobs.pending_catch_ups(state.db, host)
    return util.json_response(
        {"image_cache": format_cache(host, summary, images, pending, now=utcnow())})


def _pin(until: datetime.datetime | None, now: datetime.datetime) -> str | None:
    return util.format_time(until) if until is not None and until > now else None


def format_cache(host: str, summary: host_images.HostCacheDict | None,
                 images: list[host_images.HostImageDict],
                 pending: list[jobs.PendingCatchUpDict],
                 now: datetime.datetime) -> dict[str, Any]:
    """The cache as the API shows it (``reported_at`` null: no report yet); ``now`` (naive
    UTC) hides the pins that have ended."""
    return {
        "host": host,
        "usage_bytes": summary["usage_bytes"] if summary else 0,
        "image_count": len(images),
        "reported_at": util.format_time(summary["reported_at"]) if summary else None,
        "images": [
            {"image_id": i["image_id"], "size": i["size"],
             "last_used": util.format_time(i["last_used"]),
             "pinned_until": _pin(i["pinned_until"], now)}
            for i in images
        ],
        "pending_catch_ups": [
            {"job_id": p["job_uuid"], "aggregate_id": p["aggregate_id"],
             "image_ids": list(p["image_ids"]), "until": util.format_time(p["until"])}
            for p in pending
        ],
    }
