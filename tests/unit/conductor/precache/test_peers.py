"""Unit tests of the peer planner (fleetcache.conductor.precache.peers) and of a host call
that takes its sources from it: one fetch from the image service per peer group, every other
host from a holder of its group, upload slots, waits that end at the image service,
quarantine, credentials a source can check."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.common import config, peer_tokens
from fleetcache.common.context import get_admin_context
from fleetcache.common.db.compute_states import PeerSite
from fleetcache.compute.rpcapi import ImageResult
from fleetcache.conductor.precache.hostcall import HostCaller, HostPlan
from fleetcache.conductor.precache.hostpool import HostCallPool
from fleetcache.conductor.precache.origin import GateClosed
from fleetcache.conductor.precache.peers import Assignment, PeerPlanner, PeerQuarantine

IMG = "a26887c6-c47b-4654-abb5-dfadf7d3f803"
JOB = "0c7e3f4e-95f4-4a57-bd25-c1c2e5a3a4b1"


def site(host: str, group: str = "cell1") -> PeerSite:
    return PeerSite(url=f"http://{host}:8790", group=group, address=f"10.0.0.{host[-1]}",
                    not_cached_header=True)


class Serving:
    """The computes' ``serve_images``: every host serves what it is asked, unless listed in
    ``refuse``; records the calls."""

    def __init__(self, refuse: tuple[str, ...] = ()) -> None:
        self.refuse = refuse
        self.calls: list[tuple[str, str, list[str], float]] = []

    def serve_images(self, ctxt: Any, host: str, job_uuid: str, key: str,
                     image_ids: list[str], until: float) -> list[str]:
        self.calls.append((host, key, list(image_ids), until))
        return [] if host in self.refuse else list(image_ids)


def peer_conf() -> cfg.ConfigOpts:
    """The options of the peer tests: every default, a 5 s wait for a peer."""
    made = cfg.ConfigOpts()
    config.register_all(made)
    made([])
    made.set_override("peer_wait_timeout", 5, group="image_cache")
    return made


@pytest.fixture
def conf() -> cfg.ConfigOpts:
    return peer_conf()


def planner(conf: cfg.ConfigOpts, quarantine: PeerQuarantine | None = None) -> PeerPlanner:
    return PeerPlanner(conf, get_admin_context(), JOB, quarantine or PeerQuarantine(60))


def cached(**extra: Any) -> ImageResult:
    return ImageResult(state="cached", reason=None, bytes_downloaded=10, **extra)


def in_thread(func: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(func()), daemon=True)
    thread.start()
    return thread, out


def test_the_first_host_of_each_group_fetches_from_the_image_service(conf):
    plan = planner(conf)

    first = plan.assign("h1", site("h1"), IMG)
    other_group = plan.assign("h3", site("h3", "cell2"), IMG)

    assert first == Assignment(origin_slot=True)
    assert other_group == Assignment(origin_slot=True)


def test_a_host_waits_for_the_holder_then_gets_it_with_a_credential_it_can_check(conf):
    plan, serving = planner(conf), Serving()
    first = plan.assign("h1", site("h1"), IMG)
    waits: list[str] = []
    thread, out = in_thread(lambda: plan.assign("h2", site("h2"), IMG, on_wait=waits.append))
    time.sleep(0.3)
    assert out == [] and waits == ["for a peer of cell1"]

    plan.finished("h1", site("h1"), IMG, first, cached(), serving)
    thread.join(5)

    (second,) = out
    assert second.source == "h1" and not second.origin_slot
    (peer,) = second.peers
    assert peer["host"] == "h1" and peer["url"] == "http://h1:8790"
    assert peer.get("not_cached_header") is True  # so h2 reads a bare 404 as a failure
    ((served_host, key, served, until),) = serving.calls
    assert (served_host, served) == ("h1", [IMG])
    claims = peer_tokens.verify(peer["authorization"], {JOB: key}.get, server="h1",
                                image_id=IMG, remote_ip="10.0.0.2", check_ip=True)
    assert (claims.job, claims.requester, claims.expires) == (JOB, "h2", until)


def test_a_source_that_did_not_report_marking_its_404s_is_named_without_the_flag(conf):
    """An older compute's image server sends no ``Fleetcache-Not-Cached``: its receivers
    must keep reading its every 404 as the image's absence."""
    plan, serving = planner(conf), Serving()
    older = PeerSite(url="http://h1:8790", group="cell1", address="10.0.0.1")
    first = plan.assign("h1", older, IMG)
    plan.finished("h1", older, IMG, first, cached(), serving)

    (peer,) = plan.assign("h2", site("h2"), IMG).peers

    assert peer["host"] == "h1" and "not_cached_header" not in peer


def test_each_source_gets_a_key_of_its_own_that_signs_only_its_credentials(conf):
    """A source knows its own key only: a credential it could mint names itself; one for
    another source is refused there (and the job's key is never sent)."""
    conf.set_override("origin_downloads_per_group", 2, group="image_cache")
    plan, serving = planner(conf), Serving()
    first = {host: plan.assign(host, site(host), IMG) for host in ("h1", "h2")}
    for host, assignment in first.items():
        plan.finished(host, site(host), IMG, assignment, cached(), serving)
    keys = {host: key for host, key, _, _ in serving.calls}
    assert len(set(keys.values())) == 2 and plan.key not in keys.values()
    to_h3 = plan.assign("h3", site("h3"), IMG)
    by_host = {p["host"]: p["authorization"] for p in to_h3.peers}
    assert set(by_host) == {"h1", "h2"}
    for host, header in by_host.items():
        other = "h2" if host == "h1" else "h1"
        assert peer_tokens.verify(header, {JOB: keys[host]}.get, server=host, image_id=IMG,
                                  remote_ip="10.0.0.3", check_ip=True).server == host
        forged = peer_tokens.mint(keys[other], peer_tokens.PeerClaims(
            job=JOB, image_id=IMG, requester="h3", requester_ip="10.0.0.3", server=host,
            expires=time.time() + 60))
        with pytest.raises(peer_tokens.PeerDenied, match="bad_signature"):
            peer_tokens.verify(forged, {JOB: keys[host]}.get, server=host, image_id=IMG,
                               remote_ip="10.0.0.3", check_ip=True)


def test_a_source_takes_at_most_peer_max_uploads_receivers(conf):
    conf.set_override("peer_max_uploads", 2, group="image_cache")
    plan, serving = planner(conf), Serving()
    plan.finished("h1", site("h1"), IMG, plan.assign("h1", site("h1"), IMG), cached(), serving)
    two = [plan.assign(h, site(h), IMG) for h in ("h2", "h3")]
    thread, out = in_thread(lambda: plan.assign("h4", site("h4"), IMG))
    time.sleep(0.3)
    assert out == []  # the only holder has no free slot, and the group's origin slot is spent

    plan.finished("h2", site("h2"), IMG, two[0], cached(download_path="peer", source_host="h1"),
                  Serving(refuse=("h2",)))
    thread.join(5)

    assert [a.source for a in two] == ["h1", "h1"] and out[0].source == "h1"


def test_new_holders_share_the_uploads_least_loaded_first(conf):
    conf.set_override("peer_max_uploads", 1, group="image_cache")
    plan, serving = planner(conf), Serving()
    plan.finished("h1", site("h1"), IMG, plan.assign("h1", site("h1"), IMG), cached(), serving)
    to_h2 = plan.assign("h2", site("h2"), IMG)
    plan.finished("h2", site("h2"), IMG, to_h2, cached(download_path="peer", source_host="h1"),
                  serving)

    both = [plan.assign(h, site(h), IMG) for h in ("h3", "h4")]

    assert sorted(a.source or "" for a in both) == ["h1", "h2"]


def test_a_wait_for_a_peer_ends_at_the_image_service_after_peer_wait_timeout(conf):
    conf.set_override("peer_wait_timeout", 1, group="image_cache")
    plan = planner(conf)
    plan.assign("h1", site("h1"), IMG)

    started = time.monotonic()
    late = plan.assign("h2", site("h2"), IMG)

    assert 0.9 <= time.monotonic() - started < 3
    assert late.from_origin and not late.origin_slot
    assert late.reason is not None and late.reason.startswith("no_peer_in_time")


def test_a_peer_whose_bytes_failed_verification_is_quarantined_for_every_job(conf):
    quarantine = PeerQuarantine(60)
    plan, serving = planner(conf, quarantine), Serving()
    plan.finished("h1", site("h1"), IMG, plan.assign("h1", site("h1"), IMG), cached(), serving)
    to_h2 = plan.assign("h2", site("h2"), IMG)

    plan.finished("h2", site("h2"), IMG, to_h2,
                  cached(download_path="http", bad_peers=["h1"]), Serving(refuse=("h2",)))

    assert "h1" in quarantine
    # No usable holder is left: the next host fetches from the image service.
    assert plan.assign("h3", site("h3"), IMG) == Assignment(origin_slot=True)
    assert planner(conf, quarantine).assign("h4", site("h4"), IMG).origin_slot


def refused(*bad: str) -> ImageResult:
    """A compute of RPC 1.6 giving back peer bytes its check refused."""
    return ImageResult(state="error", reason="refused", bytes_downloaded=10,
                       bytes_from_peers=10, download_path="peer", bad_peers=list(bad),
                       fallback_reason=f"hash_mismatch: {','.join(bad)}")


def test_a_chain_behind_a_liar_is_dropped_and_only_the_liar_quarantined(conf):
    """Cut-through: h1 (the image service) -> h2 -> h3 -> h4, h1 lying. h2 names h1 (whose
    own copy verified: the liar); h3 and h4 relayed its bytes, so they are no sources until
    their own outcome, which clears them: only h1 is quarantined."""
    conf.set_override("peer_wait_timeout", 0, group="image_cache")
    quarantine = PeerQuarantine(60)
    plan, serving = planner(conf, quarantine), Serving()
    hosts = ["h1", "h2", "h3", "h4"]
    assigned = {h: plan.assign(h, site(h), IMG, client=serving) for h in hosts}
    assert [assigned[h].source for h in hosts] == [None, "h1", "h2", "h3"]
    plan.finished("h1", site("h1"), IMG, assigned["h1"], cached(), serving)

    plan.finished("h2", site("h2"), IMG, assigned["h2"], refused("h1"), serving)
    assert "h1" in quarantine
    # h3 and h4 stream the refused bytes: h5 is not given them but the image service.
    assert plan.assign("h5", site("h5"), IMG, client=serving).origin_slot
    # h2 again: h5's download is the only source, not h3 or h4.
    assert plan.assign("h2", site("h2"), IMG, client=serving).source == "h5"

    plan.finished("h4", site("h4"), IMG, assigned["h4"], refused("h3"), serving)
    plan.finished("h3", site("h3"), IMG, assigned["h3"], refused("h2"), serving)
    assert [h for h in hosts if h in quarantine] == ["h1"]


def test_a_host_named_before_its_own_outcome_is_quarantined_once_it_verified(conf):
    conf.set_override("peer_wait_timeout", 0, group="image_cache")
    quarantine = PeerQuarantine(60)
    plan, serving = planner(conf, quarantine), Serving()
    to_h1 = plan.assign("h1", site("h1"), IMG, client=serving)
    to_h2 = plan.assign("h2", site("h2"), IMG, client=serving)
    assert to_h2.source == "h1"

    plan.finished("h2", site("h2"), IMG, to_h2, refused("h1"), serving)
    assert "h1" not in quarantine  # its own outcome is not known yet...
    assert plan.assign("h3", site("h3"), IMG).reason is not None  # ...and it is no source
    plan.finished("h1", site("h1"), IMG, to_h1, cached(), serving)
    assert "h1" in quarantine


def test_a_relay_dropped_behind_a_refused_host_that_verifies_is_no_liar(conf):
    """h3 streams from h2, whose bytes from h1 are refused: h3 is no source until its own
    outcome; it then got its bytes elsewhere and verified: a source again, not quarantined."""
    conf.set_override("peer_wait_timeout", 0, group="image_cache")
    quarantine = PeerQuarantine(60)
    plan, serving = planner(conf, quarantine), Serving()
    assigned = {h: plan.assign(h, site(h), IMG, client=serving) for h in ("h1", "h2", "h3")}
    plan.finished("h1", site("h1"), IMG, assigned["h1"], cached(), serving)
    plan.finished("h2", site("h2"), IMG, assigned["h2"], refused("h1"), serving)
    assert plan.assign("h4", site("h4"), IMG).origin_slot  # h3 is not offered

    plan.finished("h3", site("h3"), IMG, assigned["h3"], cached(), serving)

    assert "h3" not in quarantine
    assert plan.assign("h5", site("h5"), IMG).source == "h3"


def test_a_source_offered_again_counts_only_its_new_receivers(conf):
    """h2's first download is refused and dropped, then offered again for its second call:
    h3, assigned to the first, finishing does not give back a slot of the second."""
    conf.set_override("peer_wait_timeout", 0, group="image_cache")
    plan, serving = planner(conf), Serving()
    assigned = {h: plan.assign(h, site(h), IMG, client=serving) for h in ("h1", "h2", "h3")}
    assert assigned["h3"].source == "h2"
    plan.finished("h1", site("h1"), IMG, assigned["h1"], cached(), serving)
    plan.finished("h2", site("h2"), IMG, assigned["h2"], refused("h1"), serving)
    again = plan.assign("h2", site("h2"), IMG, client=serving)
    assert again.origin_slot
    to_h4 = plan.assign("h4", site("h4"), IMG, client=serving)
    assert to_h4.source == "h2"

    plan.finished("h3", site("h3"), IMG, assigned["h3"], refused("h2"), serving)

    # h2's one upload slot is still h4's: h5 is not given h2 as its first source.
    assert plan.assign("h5", site("h5"), IMG, client=serving).source != "h2"


def test_a_source_that_did_not_deliver_is_not_used_again_by_the_job(conf):
    plan, serving = planner(conf), Serving()
    plan.finished("h1", site("h1"), IMG, plan.assign("h1", site("h1"), IMG), cached(), serving)
    to_h2 = plan.assign("h2", site("h2"), IMG)

    plan.finished("h2", site("h2"), IMG, to_h2,
                  cached(download_path="http", fallback_reason="peer_failed: h1: refused"),
                  serving)

    assert plan.assign("h3", site("h3"), IMG).source == "h2"


def test_a_host_that_does_not_serve_is_no_source(conf):
    plan = planner(conf)
    first = plan.assign("h1", site("h1"), IMG)

    plan.finished("h1", site("h1"), IMG, first, cached(), Serving(refuse=("h1",)))

    # The origin slot is free again and nobody holds the image for peers.
    assert plan.assign("h2", site("h2"), IMG) == Assignment(origin_slot=True)


def test_a_failed_origin_fetch_frees_the_group_slot(conf):
    plan = planner(conf)
    first = plan.assign("h1", site("h1"), IMG)

    plan.finished("h1", site("h1"), IMG, first, None, Serving())

    assert plan.assign("h2", site("h2"), IMG) == Assignment(origin_slot=True)


def test_a_waiting_host_stops_with_the_conductor(conf):
    plan, stopping = planner(conf), threading.Event()
    plan.assign("h1", site("h1"), IMG)
    thread, out = in_thread(lambda: _raised(lambda: plan.assign("h2", site("h2"), IMG,
                                                                stopping=stopping)))
    stopping.set()
    thread.join(5)

    assert isinstance(out[0], GateClosed)


def _raised(func: Any) -> Any:
    try:
        return func()
    except Exception as exc:  # noqa: BLE001 - the test looks at it
        return exc


class PeerComputes(Serving):
    """Computes of RPC 1.4: every image ``cached``, from the first peer when given one."""

    takes_peers = True
    reports_refused_peers = False
    reports_failed_peers = False

    def __init__(self) -> None:
        super().__init__()
        self.cache_calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def compute_api(self, cell: Any) -> PeerComputes:
        return self

    def cache_images(self, ctxt: Any, host: str, image_ids: list[str], **kwargs: Any) -> Any:
        with self.lock:
            self.cache_calls.append((host, kwargs))
        peers = (kwargs.get("peers") or {}).get(image_ids[0]) or []
        if peers:
            return {image_ids[0]: cached(download_path="peer", source_host=peers[0]["host"],
                                         bytes_from_peers=10)}
        return {image_ids[0]: cached(download_path="http")}


@pytest.fixture
def pool() -> Iterator[HostCallPool]:
    made = HostCallPool(3, name="test-peers")
    yield made
    made.shutdown(wait=False, cancel_futures=True)


def test_hosts_of_one_group_make_one_fetch_from_the_image_service(conf, pool):
    computes, outcomes = PeerComputes(), {}
    done = threading.Event()

    def host_done(position: int, results: dict[str, ImageResult]) -> None:
        outcomes[position] = results[IMG]
        if len(outcomes) == 4:
            done.set()

    caller = HostCaller(get_admin_context(), JOB, [IMG], None, clients=computes,
                        host_calls=pool, db=None, metrics=None,  # type: ignore[arg-type]
                        gate=None, queued=threading.BoundedSemaphore(4), host_done=host_done,
                        planner=planner(conf), peer_images=frozenset({IMG}))
    service: Any = {"cell": {"name": "cell1"}}
    plans = [HostPlan("h1", service, site=site("h1")), HostPlan("h2", service, site=site("h2")),
             HostPlan("h3", service, site=site("h3")),
             HostPlan("h4", service, site=site("h4"), holds=frozenset({IMG}))]
    for position, plan in enumerate(plans):
        pool.run(caller.call_host, position, plan)
    assert done.wait(10)

    origin = [p for p, r in outcomes.items() if r["download_path"] == "http"]
    assert len(origin) == 2  # one host of the group, and h4 whose report holds the image
    assert 3 in origin
    assert {r["source_host"] for r in outcomes.values() if r["download_path"] == "peer"} <= {
        "h1", "h2", "h3"}
    peers_given = [kw["peers"] for _, kw in computes.cache_calls if kw.get("peers")]
    assert len(peers_given) == 2


class RefusingComputes(PeerComputes):
    """Computes of RPC 1.6 whose peers (every one but the image service) lie once: the first
    call given peers comes back refused, naming them."""

    reports_refused_peers = True

    def __init__(self) -> None:
        super().__init__()
        self.lied = False

    def cache_images(self, ctxt: Any, host: str, image_ids: list[str], **kwargs: Any) -> Any:
        peers = (kwargs.get("peers") or {}).get(image_ids[0]) or []
        with self.lock:
            lie, self.lied = peers and not self.lied, self.lied or bool(peers)
        if lie:
            assert kwargs["origin_after_refused_peers"] is False
            with self.lock:
                self.cache_calls.append((host, kwargs))
            return {image_ids[0]: refused(peers[0]["host"])}
        assert "origin_after_refused_peers" not in kwargs or not peers
        return super().cache_images(ctxt, host, image_ids, **kwargs)


def h1_then_h2(computes: PeerComputes, pool: HostCallPool, plan: PeerPlanner) -> ImageResult:
    """h1's host call, then h2's, one after the other, ``plan`` their planner: h2's result."""
    outcomes: dict[int, ImageResult] = {}
    done = threading.Event()

    def host_done(position: int, results: dict[str, ImageResult]) -> None:
        outcomes[position] = results[IMG]
        done.set()

    caller = HostCaller(get_admin_context(), JOB, [IMG], None, clients=computes,
                        host_calls=pool, db=None, metrics=None,  # type: ignore[arg-type]
                        gate=None, queued=threading.BoundedSemaphore(4), host_done=host_done,
                        planner=plan, peer_images=frozenset({IMG}))
    service: Any = {"cell": {"name": "cell1"}}
    for position, host in enumerate(("h1", "h2")):
        done.clear()
        pool.run(caller.call_host, position, HostPlan(host, service, site=site(host)))
        assert done.wait(10)
    return outcomes[1]


def test_refused_peer_bytes_get_a_second_source_from_the_planner(conf, pool):
    """h2's bytes from h1 are refused: the host call asks the planner again (h1 is
    quarantined, so h2 gets the image service) and reports one result for both calls."""
    computes = RefusingComputes()
    conf.set_override("peer_wait_timeout", 0, group="image_cache")
    quarantine = PeerQuarantine(60)

    result = h1_then_h2(computes, pool, planner(conf, quarantine))

    assert "h1" in quarantine
    assert (result["state"], result["download_path"]) == ("cached", "http")
    assert (result["fallback_reason"], result["bad_peers"]) == ("hash_mismatch: h1", ["h1"])
    assert (result["bytes_downloaded"], result["bytes_from_peers"]) == (20, 10)
    assert [host for host, _ in computes.cache_calls] == ["h1", "h2", "h2"]


def test_a_waiting_host_never_sees_the_origin_slot_free_before_the_new_holder(conf):
    plan = planner(conf)
    first = plan.assign("h1", site("h1"), IMG)
    thread, out = in_thread(lambda: plan.assign("h2", site("h2"), IMG))
    time.sleep(0.2)

    class SlowServing(Serving):
        """Serves only after a pause: the waiting host is awake meanwhile."""

        def serve_images(self, *args: Any, **kwargs: Any) -> list[str]:
            time.sleep(0.5)
            return super().serve_images(*args, **kwargs)

    plan.finished("h1", site("h1"), IMG, first, cached(), SlowServing())
    thread.join(5)

    assert out[0].source == "h1" and not out[0].origin_slot


def test_an_image_without_a_strong_hash_is_asked_without_peers_or_planner(conf, pool):
    """A compute takes no peer bytes for an md5-only image: the conductor neither waits for
    a peer for it nor names one (which the compute's ``no_multihash`` would have made look
    like a source that failed)."""
    md5_only = "4d8c3732-a248-40ed-bebc-539a6ffd25c0"
    computes, outcomes, done = PeerComputes(), {}, threading.Event()

    def host_done(position: int, results: dict[str, ImageResult]) -> None:
        outcomes[position] = results
        if len(outcomes) == 2:
            done.set()

    plan_ = planner(conf)
    caller = HostCaller(get_admin_context(), JOB, [IMG, md5_only], None, clients=computes,
                        host_calls=pool, db=None, metrics=None,  # type: ignore[arg-type]
                        gate=None, queued=threading.BoundedSemaphore(4), host_done=host_done,
                        planner=plan_, peer_images=frozenset({IMG}))
    service: Any = {"cell": {"name": "cell1"}}
    for position, host in enumerate(("h1", "h2")):
        pool.run(caller.call_host, position, HostPlan(host, service, site=site(host)))
    assert done.wait(10)

    md5_calls = [kw for host, kw in computes.cache_calls if not kw.get("peers")]
    assert all(r[md5_only]["download_path"] == "http" for r in outcomes.values())
    assert sum(1 for r in outcomes.values() if r[IMG]["download_path"] == "peer") == 1
    assert len(md5_calls) == 3  # both hosts' md5-only image, and the first host's IMG
    # Holders are offered for IMG only (serve_images), never for the md5-only image.
    assert computes.calls and all(ids == [IMG] for _, _, ids, _ in computes.calls)


class SlowHolderComputes(PeerComputes):
    """Computes of RPC 1.4 whose host ``holder`` already holds the image: its call answers
    ``existing`` once ``release`` is set; ``started`` is set when that call begins."""

    def __init__(self, holder: str) -> None:
        super().__init__()
        self.holder = holder
        self.started = threading.Event()
        self.release = threading.Event()

    def cache_images(self, ctxt: Any, host: str, image_ids: list[str], **kwargs: Any) -> Any:
        if host != self.holder:
            return super().cache_images(ctxt, host, image_ids, **kwargs)
        with self.lock:
            self.cache_calls.append((host, kwargs))
        self.started.set()
        assert self.release.wait(10)
        return {image_ids[0]: ImageResult(state="existing", reason=None, bytes_downloaded=0)}


def test_a_host_that_lacks_the_image_takes_a_reported_holder_whose_call_is_under_way(conf,
                                                                                   pool):
    """h1's cache report holds the image (a host the job's earlier run cached); h2, which
    lacks it, is called while h1's call is under way: it waits for h1 and takes it as its
    peer, rather than a second copy from the image service."""
    computes, outcomes, done = SlowHolderComputes("h1"), {}, threading.Event()
    queued = threading.BoundedSemaphore(2)

    def host_done(position: int, results: dict[str, ImageResult]) -> None:
        outcomes[position] = results[IMG]
        if len(outcomes) == 2:
            done.set()

    caller = HostCaller(get_admin_context(), JOB, [IMG], None, clients=computes,
                        host_calls=pool, db=None, metrics=None,  # type: ignore[arg-type]
                        gate=None, queued=queued, host_done=host_done,
                        planner=planner(conf), peer_images=frozenset({IMG}))
    service: Any = {"cell": {"name": "cell1"}}
    queued.acquire()
    pool.run(caller.call_host, 0,
             HostPlan("h1", service, site=site("h1"), holds=frozenset({IMG})))
    assert computes.started.wait(5)
    queued.acquire()
    pool.run(caller.call_host, 1, HostPlan("h2", service, site=site("h2")))
    time.sleep(0.3)
    assert [host for host, _ in computes.cache_calls] == ["h1"]  # h2 waits for h1

    computes.release.set()
    assert done.wait(10)

    assert outcomes[0]["state"] == "existing"
    assert (outcomes[1]["download_path"], outcomes[1]["source_host"]) == ("peer", "h1")
