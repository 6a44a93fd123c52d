"""Unit tests of asking one host (fleetcache.conductor.precache.hostcall) without a job around it.

The job's paths through it (download leases, pins, a stopping pool) are tested in
test_job.py, test_origin.py and test_catchup_*.py; here the caller's own promises: one
outcome per host with a result for every image, a failure as the host's ``error``, the job's
slot given back whatever happens.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fleetcache.common.context import get_admin_context
from fleetcache.compute.rpcapi import ImageResult
from fleetcache.conductor.precache.hostcall import HostCaller, HostPlan
from fleetcache.conductor.precache.hostpool import HostCallPool
from tests.unit.conductor.precache.test_peers import peer_conf, planner, site

IMG_A = "a26887c6-c47b-4654-abb5-dfadf7d3f803"
IMG_B = "4d8c3732-a248-40ed-bebc-539a6ffd25c0"
SERVICE: Any = {"host": "h1", "cell": {"name": "cell1"}}


class Computes:
    """One client for every cell: answers with ``answer(image_ids)``; records the calls."""

    def __init__(self, answer: Callable[[list[str]], Any] | None = None) -> None:
        self.answer = answer or (lambda ids: {i: {"state": "cached", "reason": None,
                                                  "bytes_downloaded": 5} for i in ids})
        self.calls: list[tuple[str, list[str], dict[str, Any]]] = []

    def compute_api(self, cell: Any) -> Computes:
        return self

    def cache_images(self, ctxt: Any, host: str, image_ids: list[str], **kwargs: Any) -> Any:
        self.calls.append((host, list(image_ids), kwargs))
        return self.answer(image_ids)


class Outcomes:
    """The job's side: the outcomes handed back, by position."""

    def __init__(self) -> None:
        self.got: list[tuple[int, dict[str, ImageResult]]] = []

    def __call__(self, position: int, results: dict[str, ImageResult]) -> None:
        self.got.append((position, results))


@pytest.fixture
def pool() -> Iterator[HostCallPool]:
    made = HostCallPool(1, name="test-hostcall")
    yield made
    made.shutdown(wait=False, cancel_futures=True)


def make_caller(clients: Any, pool: HostCallPool, outcomes: Outcomes,
                queued: threading.BoundedSemaphore | None = None,
                pin_until: float | None = None, gate: Any = None) -> HostCaller:
    return HostCaller(
        get_admin_context(), "job-1", [IMG_A, IMG_B], pin_until, clients=clients,
        host_calls=pool, db=None, metrics=None, gate=gate,  # type: ignore[arg-type]
        queued=queued or threading.BoundedSemaphore(1), host_done=outcomes)


def test_a_worker_call_checks_the_replies_adds_the_unasked_and_gives_the_slot_back(pool):
    computes = Computes(lambda ids: {IMG_B: {"state": "existing", "reason": None,
                                             "bytes_downloaded": 0}, "other": {}})
    outcomes, queued = Outcomes(), threading.BoundedSemaphore(1)
    caller = make_caller(computes, pool, outcomes, queued)
    queued.acquire()

    caller.call_host(7, HostPlan("h1", SERVICE, {IMG_A: "no qcow2"}))

    assert computes.calls == [("h1", [IMG_B], {})]  # no pin: called without one
    ((position, results),) = outcomes.got
    assert position == 7 and list(results) == [IMG_A, IMG_B]
    assert results[IMG_A]["state"] == "unsupported" and results[IMG_A]["reason"] == "no qcow2"
    assert results[IMG_B]["state"] == "existing"
    assert queued.acquire(blocking=False)


def test_a_client_that_cannot_be_had_or_a_raising_call_is_the_hosts_error(pool):
    class NoClients:
        def compute_api(self, cell: Any) -> Any:
            raise LookupError("no transport for cell1")

    def boom(ids: list[str]) -> Any:
        raise TimeoutError("gone")

    outcomes, queued = Outcomes(), threading.BoundedSemaphore(2)
    no_clients = make_caller(NoClients(), pool, outcomes, queued)
    plan = HostPlan("h1", SERVICE)
    queued.acquire()
    queued.acquire()
    no_clients.call_host(0, plan)
    make_caller(Computes(boom), pool, outcomes, queued).call_host(1, plan)

    assert [p for p, _ in outcomes.got] == [0, 1]
    (_, lookup), (_, call) = outcomes.got
    assert {r["state"] for r in (*lookup.values(), *call.values())} == {"error"}
    assert lookup[IMG_A]["reason"] == "LookupError: no transport for cell1"
    assert call[IMG_B]["reason"] == "TimeoutError: gone"
    assert queued.acquire(blocking=False) and queued.acquire(blocking=False)


class PeerComputes(Computes):
    """Computes of compute RPC 1.7 (peers, refused and failed peers reported) that serve
    what they are asked; ``events`` records ``serve_images`` and ``cache_images`` in order."""

    takes_peers = takes_terms = reports_refused_peers = reports_failed_peers = True

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []

    def serve_images(self, ctxt: Any, host: str, job_uuid: str, key: str,
                     image_ids: list[str], until: float) -> list[str]:
        self.events.append(("serve", host))
        return list(image_ids)

    def cache_images(self, ctxt: Any, host: str, image_ids: list[str], **kwargs: Any) -> Any:
        self.events.append(("cache", host))
        return super().cache_images(ctxt, host, image_ids, **kwargs)


def test_a_host_from_the_image_service_is_offered_to_peers_once_it_has_its_slot(pool):
    """With cut-through, the host the planner gives the image service is announced as a
    source (``serve_images``) only when it may start: its image server would answer 404 to
    an announcement that waited for a download slot longer than ``peer_stall_timeout``, and
    its receivers would give it up as dead."""
    conf = peer_conf()
    computes, outcomes, slots = PeerComputes(), Outcomes(), threading.BoundedSemaphore(1)
    queued = threading.BoundedSemaphore(1)
    caller = HostCaller(
        get_admin_context(), "job-1", [IMG_A], None, clients=computes, host_calls=pool,
        db=None, metrics=None, gate=None,  # type: ignore[arg-type]
        queued=queued, host_done=outcomes,
        planner=planner(conf), peer_images=frozenset([IMG_A]), origin_slots=slots)
    queued.acquire()
    slots.acquire()  # another host of the job downloads from the image service

    thread = threading.Thread(
        target=caller.call_host, args=(0, HostPlan("h1", SERVICE, site=site("h1"))),
        daemon=True)
    thread.start()
    time.sleep(0.5)
    assert computes.events == []

    slots.release()
    thread.join(10)

    # Offered, called, then (its base served) offered as a holder.
    assert computes.events == [("serve", "h1"), ("cache", "h1"), ("serve", "h1")]
    ((_, results),) = outcomes.got
    assert results[IMG_A]["state"] == "cached"
