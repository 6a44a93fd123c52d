"""``/os-aggregates/{id}/images``: pre-cache images on an aggregate's hosts, and follow the job.

``POST`` is Nova's (microversion 2.81): validate, ask the conductor to queue a job, answer 202
with an empty body. Beyond Nova, the answer's ``Location`` names the job, and
``GET .../images/jobs[/{job_id}]`` shows jobs with their per-host, per-image results (state,
reason, bytes, and for a download the path it took, ``rbd`` or ``http``, with the reason of
a fallback from the direct path).

At ``OpenStack-API-Version: fleetcache 1.1`` the request may carry the job's terms
(:mod:`fleetcache.common.job_terms`: when it may download and how hard it may pull), checked
against this API's ``[image_cache]`` caps before the conductor is asked.
"""

from __future__ import annotations

from typing import Any

import oslo_messaging as messaging
import webob
from oslo_log import log as logging

from fleetcache.api import fault, microversion, policy, util, validation
from fleetcache.api.handlers import aggregates
from fleetcache.api.policies import aggregate_images as policies
from fleetcache.api.schemas import aggregate_images as schemas
from fleetcache.api.state import ApiState
from fleetcache.common import exception, job_terms, rpc
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import jobs as db_jobs

LOG = logging.getLogger(__name__)


def job_path(aggregate_id: int, job_uuid: str) -> str:
    return f"/v2.1/os-aggregates/{aggregate_id}/images/jobs/{job_uuid}"


@microversion.version_handler("2.81")
def cache_aggregate_images(req: webob.Request) -> webob.Response:
    """Pre-cache images on every host of an aggregate (202, ``Location``: the job)."""
    state = util.get_state(req)
    context = util.get_context(req)
    policy.authorize(state.enforcer, context, policies.IMAGES, target={})
    ident = aggregates.aggregate_id(req)
    body = _request_body(req)
    image_ids = [item["id"] for item in body["cache"]]
    if len(set(image_ids)) != len(image_ids):
        raise exception.InvalidInput("Duplicate images in request")
    pin_seconds = body.get(schemas.PIN_KEY)
    terms = _terms(state, body)
    db_aggregates.aggregate_get(state.db, ident)  # 404 before the conductor is asked
    try:
        job = state.conductor_api.cache_images(context, ident, image_ids,
                                               pin_seconds=pin_seconds, terms=terms or None)
    except (exception.AggregateNotFound, exception.RPCVersionCapped):
        raise  # 404; 409: the conductor is capped below what the request needs
    except exception.FleetcacheException as exc:
        # As Nova: whatever the conductor refuses (missing or unusable image) is a 400.
        return fault.fault_response(400, exc.message, exc.error_code)
    except messaging.MessagingTimeout:
        LOG.error("The conductor did not answer cache_images for aggregate %s", ident)
        return fault.fault_response(503, "The conductor did not answer in time; retry later.")
    except rpc.DELIVERY_ERRORS as exc:  # e.g. the bus stayed unreachable
        LOG.error("cache_images for aggregate %s not delivered to the conductor: %s: %s",
                  ident, type(exc).__name__, exc)
        return fault.fault_response(503, "The conductor could not be reached; retry later.")
    location = util.base_url(req) + job_path(ident, job["uuid"])
    LOG.info("Pre-cache job %s queued for aggregate %s: %s", job["uuid"], ident, image_ids)
    return util.empty_response(202, headers={"Location": location})


def _request_body(req: webob.Request) -> dict[str, Any]:
    """The body, validated at the request's fleetcache version: a term below 1.1 is a 400
    naming the version it needs rather than an unknown key."""
    body = util.read_json(req)
    version = microversion.extension_version(req)
    if not version.matches(microversion.EXTENSION_TERMS):
        used = [key for key in schemas.TERMS_KEYS if isinstance(body, dict) and key in body]
        if used:
            raise exception.InvalidInput(
                f"{used[0]} needs OpenStack-API-Version: {microversion.EXTENSION_SERVICE_TYPE} "
                f"{microversion.EXTENSION_TERMS} or later (this request is at "
                f"{microversion.EXTENSION_SERVICE_TYPE} {version})")
        validation.validate(body, schemas.CACHE_V2_81)
    else:
        validation.validate(body, schemas.CACHE_FLEETCACHE_1_1)
    return dict(body)


def _terms(state: ApiState, body: dict[str, Any]) -> job_terms.JobTerms:
    """The request's terms, checked against the operator's caps of this API's configuration.

    :raises InvalidInput: naming the field and the limit (400).
    """
    terms = {key[len(schemas.TERM_PREFIX):]: body[key]
             for key in schemas.TERMS_KEYS if key in body}
    if not terms:
        return job_terms.JobTerms()
    return job_terms.check_terms(terms, job_terms.Caps.from_conf(state.conf))


def _counts(results: list[db_jobs.JobResultDict]) -> dict[str, int]:
    counts = dict.fromkeys(db_jobs.STORED_STATES, 0)
    for result in results:
        counts[result["state"]] = counts.get(result["state"], 0) + 1
    return counts


def _hosts(results: list[db_jobs.JobResultDict]) -> list[dict[str, Any]]:
    by_host: dict[str, dict[str, Any]] = {}
    for result in sorted(results, key=lambda r: (r["host"], r["image_id"])):
        entry = by_host.setdefault(
            result["host"], {"host": result["host"], "bytes_downloaded": 0, "images": []}
        )
        entry["bytes_downloaded"] += result["bytes_downloaded"]
        entry["images"].append(
            {
                "image_id": result["image_id"],
                "state": result["state"],
                "reason": result["reason"],
                "bytes_downloaded": result["bytes_downloaded"],
                "download_path": result["download_path"],
                "fallback_reason": result["fallback_reason"],
                "source_host": result["source_host"],
                "bytes_from_peers": result["bytes_from_peers"],
                "updated_at": util.format_time(result["updated_at"]),
            }
        )
    return list(by_host.values())


def format_job(req: webob.Request, job: db_jobs.JobDict, detail: bool) -> dict[str, Any]:
    """A job as the API shows it; ``detail`` adds the per-host results."""
    results = job["results"]
    body: dict[str, Any] = {
        "id": job["uuid"],
        "aggregate_id": job["aggregate_id"],
        "aggregate_uuid": job["aggregate_uuid"],
        "image_ids": list(job["image_ids"]),
        "state": job["state"],
        "error": job["error"],
        "total_hosts": job["total_hosts"],
        # A host stored ``waiting`` (for a download slot) has not reported yet.
        "hosts_reported": len({r["host"] for r in results if r["state"] != db_jobs.WAITING}),
        "counts": _counts(results),
        "bytes_downloaded": sum(r["bytes_downloaded"] for r in results),
        "created_at": util.format_time(job["created_at"]),
        "started_at": util.format_time(job["started_at"]),
        "finished_at": util.format_time(job["finished_at"]),
        "pin_until": util.format_time(job["pin_until"]),
        "catch_up_until": util.format_time(job["catch_up_until"]),
        # fleetcache 1.1: the request's terms ({}: none) and, while the job is scheduled
        # (waiting for its window), when it next starts.
        "terms": dict(job.get("terms") or {}),
        "next_start_at": (util.format_time(job.get("next_start_at"))
                          if job["state"] == db_jobs.SCHEDULED else None),
        "distribution": db_jobs.job_distribution(job),
        "links": [
            {"rel": "self", "href": util.base_url(req) + job_path(job["aggregate_id"], job["uuid"])}
        ],
    }
    if detail:
        body["hosts"] = _hosts(results)
    return body


@microversion.version_handler("2.81")
def list_aggregate_image_jobs(req: webob.Request) -> webob.Response:
    """List the pre-cache jobs of an aggregate, newest first, without per-host results."""
    state = util.get_state(req)
    policy.authorize(state.enforcer, util.get_context(req), policies.JOBS)
    aggregate = db_aggregates.aggregate_get(state.db, aggregates.aggregate_id(req))
    jobs = [
        job
        for job in db_jobs.job_list(state.db, aggregate_id=aggregate["id"])
        # An id can come back after a delete (SQLite reuses them): the uuid tells them apart.
        if job["aggregate_uuid"] == aggregate["uuid"]
    ]
    jobs.sort(key=lambda j: j["id"], reverse=True)
    return util.json_response({"jobs": [format_job(req, j, detail=False) for j in jobs]})


def _aggregate_uuid(state: ApiState, ident: int) -> str | None:
    """The uuid of aggregate ``ident``; ``None`` once it is deleted (its jobs stay readable)."""
    try:
        return db_aggregates.aggregate_get(state.db, ident)["uuid"]
    except exception.AggregateNotFound:
        return None


@microversion.version_handler("2.81")
def get_aggregate_image_job(req: webob.Request) -> webob.Response:
    """Show one pre-cache job with its state, counts and per-host, per-image results."""
    state = util.get_state(req)
    policy.authorize(state.enforcer, util.get_context(req), policies.JOBS)
    ident = aggregates.aggregate_id(req)
    job_uuid = req.urlvars["job_id"]
    job = db_jobs.job_get(state.db, job_uuid)
    current = _aggregate_uuid(state, ident)
    if job["aggregate_id"] != ident or current not in (None, job["aggregate_uuid"]):
        raise exception.JobNotFound(job_id=job_uuid)
    return util.json_response({"job": format_job(req, job, detail=True)})
