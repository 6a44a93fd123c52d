"""Notifications of the pre-cache job: ``aggregate.cache_images.start|progress|end``.

The payloads follow Nova's (``AggregatePayload`` for start and end, ``AggregateCachePayload``
1.0 for progress) as flat JSON objects, plus the ``job_uuid`` so a consumer can match them to
the job resource. Sending is best effort: a broken notifier is logged, never allowed to break
the job.
"""

from __future__ import annotations

import logging
from typing import Any, NotRequired, TypedDict

from fleetcache.common.context import RequestContext
from fleetcache.common.db.aggregates import AggregateDict
from fleetcache.common.db.jobs import JobDistribution

LOG = logging.getLogger(__name__)

START = "aggregate.cache_images.start"
PROGRESS = "aggregate.cache_images.progress"
END = "aggregate.cache_images.end"


class AggregatePayload(TypedDict):
    """The aggregate a job runs on (Nova's ``AggregatePayload``), and the job."""

    id: int
    uuid: str
    name: str
    hosts: list[str]
    metadata: dict[str, str]
    job_uuid: str


class AggregateEndPayload(AggregatePayload):
    """The end's payload: the aggregate and the job, and where the job's downloads came
    from (``fleetcache.common.db.jobs.job_distribution``: origin and peer copies, their
    bytes, offload, time to all hosts), as the job resource shows it."""

    distribution: NotRequired[JobDistribution]


class AggregateCachePayload(TypedDict):
    """One host's outcome (Nova's ``AggregateCachePayload`` 1.0), and the job.

    ``images_cached`` holds the images that are ``cached`` or ``existing`` on the host;
    ``images_failed`` every other one (``error``, ``unsupported``, ``skipped``, ``pending``).
    ``index`` counts the hosts finished so far (1..``total``).
    """

    id: int
    uuid: str
    name: str
    host: str
    images_cached: list[str]
    images_failed: list[str]
    index: int
    total: int
    job_uuid: str


def aggregate_payload(aggregate: AggregateDict, job_uuid: str) -> AggregatePayload:
    return AggregatePayload(
        id=aggregate["id"],
        uuid=aggregate["uuid"],
        name=aggregate["name"],
        hosts=list(aggregate["hosts"]),
        metadata=dict(aggregate["metadata"]),
        job_uuid=job_uuid,
    )


def end_payload(aggregate: AggregateDict, job_uuid: str,
                distribution: JobDistribution | None) -> AggregateEndPayload:
    """The end's payload; ``distribution`` left out when ``None`` (it could not be read)."""
    payload = AggregateEndPayload(
        id=aggregate["id"], uuid=aggregate["uuid"], name=aggregate["name"],
        hosts=list(aggregate["hosts"]), metadata=dict(aggregate["metadata"]),
        job_uuid=job_uuid)
    if distribution is not None:
        payload["distribution"] = distribution
    return payload


class CacheNotifier:
    """Sends the three pre-cache notifications through an oslo.messaging notifier.

    :param notifier: an ``oslo_messaging.Notifier`` (``rpc.get_notifier``), or ``None`` to
        send nothing.
    """

    def __init__(self, notifier: Any | None) -> None:
        self._notifier = notifier

    def start(self, ctxt: RequestContext, payload: AggregatePayload) -> None:
        self._send(ctxt, START, dict(payload))

    def progress(self, ctxt: RequestContext, payload: AggregateCachePayload) -> None:
        self._send(ctxt, PROGRESS, dict(payload))

    def end(self, ctxt: RequestContext, payload: AggregateEndPayload) -> None:
        self._send(ctxt, END, dict(payload))

    def _send(self, ctxt: RequestContext, event_type: str, payload: dict[str, Any]) -> None:
        if self._notifier is None:
            return
        try:
            self._notifier.info(ctxt, event_type, payload)
        except Exception:
            LOG.exception("Could not send notification %s", event_type)
