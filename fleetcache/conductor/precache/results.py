"""What a pre-cache job gathers: per-host results, their counts, and their storage.

:class:`JobStats` counts outcomes as hosts finish (callers hold the job's lock).
:class:`ResultWriter` stores results on its own thread: whatever arrived while the previous
write ran, or within ``linger`` seconds after the first result of a batch, goes into the next
transaction, so a job writes at most about 1 / ``linger`` transactions a second whatever its
concurrency, never one per host. Once a batch is stored it runs each host's ``after_write``
(the progress notification), in arrival order: a
consumer that sees a notification finds the result in the job resource, and the compute
calls never wait for the notifier.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import queue
import threading
from collections.abc import Callable, Mapping

from fleetcache.common.db import jobs
from fleetcache.common.db.session import Database
from fleetcache.compute.rpcapi import PAUSED, ImageResult

LOG = logging.getLogger(__name__)

#: States that mean the image is in the host's cache.
CACHED_STATES = ("cached", "existing")

#: Called once the results it came with are stored (sends that host's notification).
AfterWrite = Callable[[], None]
#: A host, its results and what to do once they are stored; ``None`` tells the writer to stop.
_Item = tuple[str, dict[str, ImageResult], AfterWrite | None] | None


def same_result_per_image(
    image_ids: list[str], state: str, reason: str | None
) -> dict[str, ImageResult]:
    """A host's results when one outcome (skipped, unreachable, ...) settles all its images."""
    return {i: ImageResult(state=state, reason=reason, bytes_downloaded=0) for i in image_ids}


def unpaused(results: Mapping[str, ImageResult], state: str,
             reason: str) -> dict[str, ImageResult]:
    """``results`` with each ``paused`` one (a download its call's end time cut) in
    ``state``: ``waiting`` for the job's next window, ``pending`` for catch-up's, ``skipped``
    at the deadline; its bytes and the compute's words (what it kept) go with it."""
    return {i: r if r["state"] != PAUSED else ImageResult(
        state=state, bytes_downloaded=r["bytes_downloaded"],
        reason=f"{reason}: {r['reason']}" if r.get("reason") else reason)
        for i, r in results.items()}


def checked_replies(replies: Mapping[str, ImageResult],
                    image_ids: list[str]) -> dict[str, ImageResult]:
    """A compute's ``cache_images`` replies for ``image_ids``, each made a valid result: a
    missing or malformed one is that image's ``error``, naming what came."""
    results = {}
    for image_id in image_ids:
        reply = replies.get(image_id) if isinstance(replies, Mapping) else None
        if (not isinstance(reply, Mapping)
                or reply.get("state") not in (*jobs.FINAL_RESULT_STATES, PAUSED)):
            reply = ImageResult(state="error", bytes_downloaded=0,
                                reason=f"compute returned no valid result: {reply!r}")
        results[image_id] = ImageResult(
            state=reply["state"], reason=reply.get("reason"),
            # A download resumed from the bytes a call cut at its end time kept: the job
            # counts both calls' bytes.
            bytes_downloaded=(int(reply.get("bytes_downloaded") or 0)
                              + (_count_or_none(reply.get("bytes_resumed")) or 0)),
            download_path=_text_or_none(reply.get("download_path")),
            fallback_reason=_text_or_none(reply.get("fallback_reason")),
            source_host=_text_or_none(reply.get("source_host")),
            bytes_from_peers=_count_or_none(reply.get("bytes_from_peers")),
            bad_peers=_hosts(reply.get("bad_peers")),
        )
        failed = reply.get("failed_peers")
        if isinstance(failed, list):  # an image whose peers all failed, given back (1.7)
            results[image_id]["failed_peers"] = _hosts(failed)
        absent = _hosts(reply.get("absent_peers"))
        if absent:  # peers that do not hold the image (any version that reports them)
            results[image_id]["absent_peers"] = absent
    return results


def _hosts(value: object) -> list[str]:
    """The host names of an optional list of hosts in a compute's reply (none from a compute
    that predates it; a value that is no list names none)."""
    return [h for h in value if isinstance(h, str)] if isinstance(value, list) else []


def _count_or_none(value: object) -> int | None:
    """An optional byte count of a compute's reply (None from a compute that predates it)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text_or_none(value: object) -> str | None:
    """An optional text field of a compute's reply (None from a compute that predates it)."""
    return value if isinstance(value, str) else None


@dataclasses.dataclass
class JobStats:
    """Counts of image-on-host outcomes, as Nova's summary; ``skipped_hosts`` counts hosts."""

    cached: int = 0
    existing: int = 0
    error: int = 0
    unsupported: int = 0
    skipped_hosts: int = 0
    hosts_done: int = 0
    failed_images: collections.Counter[str] = dataclasses.field(
        default_factory=collections.Counter
    )

    def add_host(self, results: Mapping[str, ImageResult]) -> None:
        """Count one finished host."""
        self.hosts_done += 1
        states = [r["state"] for r in results.values()]
        if states and all(s == "skipped" for s in states):
            self.skipped_hosts += 1
        for image_id, result in results.items():
            state = result["state"]
            if state == "cached":
                self.cached += 1
            elif state == "existing":
                self.existing += 1
            elif state == "unsupported":
                self.unsupported += 1
            elif state == "error":
                self.error += 1
                self.failed_images[image_id] += 1

    def summary(self) -> str:
        return (
            f"{self.cached} cached, {self.existing} existing, {self.error} errors, "
            f"{self.unsupported} unsupported, {self.skipped_hosts} skipped hosts"
        )


class ResultWriter:
    """Stores per-host results of one job in batches, on a thread of its own.

    :param max_batch: most hosts written in one transaction.
    :param linger: seconds a batch waits for more results after its first one.
    :param max_queue: most hosts waiting to be written; :meth:`put` waits while that many
        are, so that the calls finishing faster than results are stored slow down to the
        writer's pace instead of piling up in memory.

    NOTE: unbounded, the queue held 7,572-7,837 hosts (results, notification payload and
    callback each) at its longest in each 10,000-host job of ``bench/fanout.py --hosts
    10000 --cells 4`` against 135-181 at 1,000 hosts: the writer, which also sends each
    host's progress notification, stored about 125 hosts a second while the calls finished
    faster, and the conductor's resident size after the job grew with the job's host count
    (docs/performance.md, "Fan-out at 10,000 hosts").

    NOTE: without ``linger``, ``precache_concurrency = 1`` made one transaction per host, at
    markedly more conductor CPU per host for the same job wall time; a result
    shows up in the job at most ``linger`` later. The writer sleeps out the linger and then
    takes what came: waiting on the queue instead woke it at every result
    (``Condition.notify`` in ``put``). Both measured with ``bench/fanout.py`` at 1,000 hosts
    (docs/performance.md, "The result writer's linger").
    """

    def __init__(self, db: Database, job_uuid: str, max_batch: int = 200,
                 linger: float = 0.2, max_queue: int = 1000) -> None:
        self.db = db
        self.job_uuid = job_uuid
        self.max_batch = max_batch
        self.linger = linger
        self.error: str | None = None
        self._queue: queue.Queue[_Item] = queue.Queue(max_queue)
        self._closing = threading.Event()
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, name=f"precache-writer-{job_uuid[:8]}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def put(self, host: str, results: Mapping[str, ImageResult],
            after_write: AfterWrite | None = None) -> None:
        """Queue a host's results; ``after_write`` runs on the writer's thread once they are
        stored (or failed to be), in the order the results were put. Waits while the queue
        is full.

        After :meth:`close` they are not stored, and said so: that happens only to a call
        that answers after its conductor stopped waiting (the host is then asked again by
        the job's next owner)."""
        if self._closed:
            LOG.warning("Results of %s in image pre-cache job %s came after the job stopped "
                        "storing results: not stored", host, self.job_uuid)
            return
        self._queue.put((host, dict(results), after_write))

    def close(self) -> str | None:
        """Write what is left and stop. :returns: the first write error, if any."""
        self._closed = True
        self._queue.put(None)
        self._closing.set()  # cuts a linger short
        self._thread.join()
        return self.error

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch: dict[str, dict[str, ImageResult]] = {}
            then: list[AfterWrite] = []
            item = self._queue.get()
            if item is not None and self._queue.qsize() < self.max_batch - 1:
                self._closing.wait(self.linger)
            while True:
                if item is None:
                    stopping = True
                    break
                host, results, after_write = item
                batch[host] = results
                if after_write is not None:
                    then.append(after_write)
                if len(batch) >= self.max_batch:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            self._write(batch)
            for func in then:
                try:
                    func()
                except Exception:
                    LOG.exception("After storing results of job %s", self.job_uuid)

    def _write(self, batch: dict[str, dict[str, ImageResult]]) -> None:
        if not batch:
            return
        try:
            jobs.job_record_hosts(self.db, self.job_uuid, batch)
        except Exception as exc:
            LOG.exception("Could not store results of %d hosts of job %s",
                          len(batch), self.job_uuid)
            if self.error is None:
                self.error = f"could not store results: {exc}"
