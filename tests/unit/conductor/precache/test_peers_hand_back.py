"""Unit tests of an image given back to the conductor because its peers all failed (compute
RPC 1.7): the host call asks the planner for the next source, the image service under the
group's slot, with the bytes kept counted once; the planner never gives a host its own
receivers, and a host that failed a receiver holds no image service slot."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.compute.rpcapi import ImageResult
from fleetcache.conductor.precache.handback import (
    MAX_SOURCES,
    after_handed_back,
    from_sources_in_turn,
)
from fleetcache.conductor.precache.hostpool import HostCallPool
from fleetcache.conductor.precache.peers import Assignment
from fleetcache.conductor.precache.results import checked_replies
from tests.unit.conductor.precache.test_peers import (
    IMG,
    PeerComputes,
    Serving,
    h1_then_h2,
    peer_conf,
    planner,
    site,
)

#: Bytes of the image the failed peer sent before it died (kept by the receiver).
KEPT = 4


@pytest.fixture
def conf() -> cfg.ConfigOpts:
    made = peer_conf()
    made.set_override("peer_max_uploads", 1, group="image_cache")
    return made


@pytest.fixture
def pool() -> Iterator[HostCallPool]:
    made = HostCallPool(3, name="test-hand-back")
    yield made
    made.shutdown(wait=False, cancel_futures=True)


def gone(*failed: str) -> ImageResult:
    """A compute of RPC 1.7 giving back an image whose peers all failed, KEPT bytes kept."""
    return ImageResult(state="error", reason="peer_failed", bytes_downloaded=KEPT,
                       bytes_from_peers=KEPT, download_path="peer", failed_peers=list(failed),
                       fallback_reason=f"peer_failed: {failed[-1] if failed else 'no peer'}: "
                       "cannot connect")


class GivingBackComputes(PeerComputes):
    """Computes of RPC 1.7 whose first call given peers finds them all dead: the image comes
    back with KEPT bytes kept, which the next call from the image service resumes."""

    reports_refused_peers = True
    reports_failed_peers = True

    def cache_images(self, ctxt: Any, host: str, image_ids: list[str], **kwargs: Any) -> Any:
        peers = (kwargs.get("peers") or {}).get(image_ids[0]) or []
        with self.lock:
            self.cache_calls.append((host, kwargs))
        if peers:
            assert kwargs["origin_after_failed_peers"] is False
            return {image_ids[0]: gone(peers[0]["host"])}
        if host == "h2":  # resumes what its first call kept: 6 more bytes fetched
            return {image_ids[0]: cached_with(download_path="http", bytes_downloaded=10 - KEPT,
                                              bytes_resumed=KEPT)}
        return {image_ids[0]: cached_with(download_path="http", bytes_downloaded=10)}


def cached_with(**fields: Any) -> ImageResult:
    return ImageResult(**{"state": "cached", "reason": None, **fields})


def test_failed_peers_get_the_next_source_from_the_planner_under_the_groups_slot(conf, pool):
    """h2's only peer h1 died: the host call asks the planner again; h1 failed h2, so h2
    gets the group's image service slot (h1's call having ended), and its one result counts
    the bytes it kept once."""
    computes, plan_ = GivingBackComputes(), planner(conf)

    result = h1_then_h2(computes, pool, plan_)

    assert [host for host, _ in computes.cache_calls] == ["h1", "h2", "h2"]
    assert computes.cache_calls[2][1].get("peers") is None  # the image service, second
    assert (result["state"], result["download_path"]) == ("cached", "http")
    assert result["fallback_reason"] == "peer_failed: h1: cannot connect"
    assert (result["bytes_downloaded"], result["bytes_from_peers"]) == (10, KEPT)
    assert result.get("failed_peers") == ["h1"]
    # h1 (a holder) is not offered again by the job: a third host gets h2 only.
    assert [p["host"] for p in plan_.assign("h3", site("h3"), IMG).peers] == ["h2"]


def test_a_host_back_for_a_source_is_not_given_its_own_receivers(conf):
    """Cut-through chain h1 (the image service) -> h2 -> h3. h1 dies; h2 gives the image
    back. Its receiver h3 waits for h2's bytes, so h2 must not be told to fetch from h3
    (neither would ever send): it gets the image service, h1's slot being free since h1
    failed a receiver, although h1's own call has not ended."""
    plan, serving = planner(conf), Serving()
    first = plan.assign("h1", site("h1"), IMG, client=serving)
    second = plan.assign("h2", site("h2"), IMG, client=serving)
    third = plan.assign("h3", site("h3"), IMG, client=serving)
    assert first.origin_slot and (second.source, third.source) == ("h1", "h2")

    plan.finished("h2", site("h2"), IMG, second, gone("h1"), serving)
    again = plan.assign("h2", site("h2"), IMG, client=serving)

    assert again == Assignment(origin_slot=True)


#: A second image, held by the same source.
IMG2 = "5b0b5e0c-2f4e-4f7e-9a3c-0d4c1d2e3f40"


def holder_of_both(conf: cfg.ConfigOpts) -> tuple[Any, Serving]:
    """A planner whose h1 fetched IMG and IMG2 from the image service and serves both."""
    plan, serving = planner(conf), Serving()
    for image in (IMG, IMG2):
        plan.finished("h1", site("h1"), image, plan.assign("h1", site("h1"), image),
                      cached_with(bytes_downloaded=10), serving)
    return plan, serving


def test_a_peer_that_lacks_an_image_is_dropped_for_that_image_only(conf):
    """h1 answered h2 404 for IMG (its base was converted once its download ended, or aged
    out): h2 gives IMG back naming h1 absent, not failed. h1 is no source of IMG any more,
    but still one of IMG2, and it failed no one, so it is not set aside for the job."""
    plan, serving = holder_of_both(conf)
    to_h2 = plan.assign("h2", site("h2"), IMG, client=serving)
    assert to_h2.source == "h1"

    plan.finished("h2", site("h2"), IMG, to_h2,
                  {**gone(), "absent_peers": ["h1"],
                   "fallback_reason": "peer_failed: h1: HTTP 404"}, serving)

    assert plan.assign("h2", site("h2"), IMG, client=serving) == Assignment(origin_slot=True)
    assert plan.assign("h3", site("h3"), IMG2, client=serving).source == "h1"


def test_a_receiver_served_by_the_image_service_after_a_404_fails_no_one(conf):
    """h2 was given h1 for IMG; h1 answered 404 and the image service sent the image: h1 did
    not deliver, but only because it lacks IMG, so it stays a source of IMG2."""
    plan, serving = holder_of_both(conf)
    to_h2 = plan.assign("h2", site("h2"), IMG, client=serving)

    plan.finished("h2", site("h2"), IMG, to_h2,
                  cached_with(bytes_downloaded=10, download_path="http", source_host=None,
                              absent_peers=["h1"]), serving)

    assert plan.assign("h4", site("h4"), IMG, client=serving).source == "h2"
    assert plan.assign("h4", site("h4"), IMG2, client=serving).source == "h1"


def test_a_404_from_a_download_under_way_that_has_finished_since_drops_no_holder(conf):
    """h2 was given h1 while h1's own download ran (cut-through), and h1 answered 404 (not
    started yet); h1 then finished and serves IMG. h2's result, which comes after that,
    must not take h1 away: its 404 is older than h1's copy."""
    plan, serving = planner(conf), Serving()
    first = plan.assign("h1", site("h1"), IMG, client=serving)
    to_h2 = plan.assign("h2", site("h2"), IMG, client=serving)
    assert (first.origin_slot, to_h2.source) == (True, "h1")

    plan.finished("h1", site("h1"), IMG, first, cached_with(bytes_downloaded=10), serving)
    plan.finished("h2", site("h2"), IMG, to_h2,
                  cached_with(bytes_downloaded=10, download_path="http", absent_peers=["h1"]),
                  serving)

    assert plan.assign("h3", site("h3"), IMG, client=serving).source == "h1"


def test_a_404_from_before_a_source_was_offered_again_drops_no_holder(conf):
    """h1, a partial source of h2, gives IMG back (its peers failed) and is offered again
    for its next download; h2's 404 from h1, reported after that, is older than h1's new
    download, so h1 stays a source of it."""
    plan, serving = planner(conf), Serving()
    plan.finished("h0", site("h0"), IMG, Assignment(), cached_with(bytes_downloaded=10),
                  serving)
    to_h1 = plan.assign("h1", site("h1"), IMG, client=serving)
    to_h2 = plan.assign("h2", site("h2"), IMG, client=serving)
    assert (to_h1.source, to_h2.source) == ("h0", "h1")

    plan.finished("h1", site("h1"), IMG, to_h1, gone("h0"), serving)
    again = plan.assign("h1", site("h1"), IMG, client=serving)  # h0 failed it: the origin
    plan.finished("h2", site("h2"), IMG, to_h2, {**gone(), "absent_peers": ["h1"]}, serving)

    assert again.origin_slot
    assert plan.assign("h3", site("h3"), IMG, client=serving).source == "h1"


def test_a_host_named_absent_that_the_receiver_was_not_given_is_ignored(conf):
    """A result names only peers the host was given; any other name (a confused or hostile
    compute) takes no holder away."""
    conf.set_override("peer_candidates", 1, group="image_cache")
    plan, serving = holder_of_both(conf)
    plan.finished("h3", site("h3"), IMG, Assignment(), cached_with(bytes_downloaded=10),
                  serving)
    to_h2 = plan.assign("h2", site("h2"), IMG)
    assert [p["host"] for p in to_h2.peers] == ["h1"]

    plan.finished("h2", site("h2"), IMG, to_h2,
                  cached_with(bytes_downloaded=10, download_path="peer", source_host="h1",
                              absent_peers=["h3"]), Serving(refuse=("h2",)))

    assert plan.assign("h4", site("h4"), IMG).source == "h1"
    assert plan.assign("h5", site("h5"), IMG).source == "h3"  # h1's one upload slot is h4's


@pytest.mark.parametrize(("absent", "kept"), [
    (["h1", 7, None, "h3"], ["h1", "h3"]),
    ("h1", None),  # a string is no list: not read as the hosts h and 1
    ({"h1": True}, None),
    ([], None),
])
def test_only_host_names_of_a_list_are_read_as_absent_peers(absent: Any, kept: Any) -> None:
    """A compute's reply is checked before the planner reads it: a malformed
    ``absent_peers`` names no host."""
    reply = {IMG: {**cached_with(bytes_downloaded=10), "absent_peers": absent}}

    assert checked_replies(reply, [IMG])[IMG].get("absent_peers") == kept


def test_absent_peers_of_both_calls_are_named_once_in_the_result() -> None:
    """The job's one result for the image names the absent peers of every call for it."""
    back = {**gone(), "absent_peers": ["h1"]}
    second = cached_with(bytes_downloaded=10, download_path="http", absent_peers=["h3", "h1"])

    merged = after_handed_back(back, second)

    assert merged["absent_peers"] == ["h1", "h3"]  # in the order they answered
    assert merged["failed_peers"] == []


def test_a_host_that_failed_no_one_keeps_its_image_service_slot(conf):
    conf.set_override("peer_wait_timeout", 0, group="image_cache")
    plan = planner(conf)
    assert plan.assign("h1", site("h1"), IMG).origin_slot
    late = plan.assign("h2", site("h2"), IMG)  # no holder, and h1 holds the group's slot
    assert late.from_origin and not late.origin_slot and late.reason


def test_sources_are_asked_in_turn_at_most_max_sources_times() -> None:
    """Each call handing the image back asks for the next source; the last call is told
    to settle it itself (from the image service), so a host never loops."""
    asked: list[tuple[bool, bool]] = []

    def ask(report: bool, hand_back: bool) -> tuple[ImageResult, int]:
        asked.append((report, hand_back))
        if hand_back:
            return gone(f"h{len(asked)}"), 0
        return cached_with(bytes_downloaded=10, download_path="http"), KEPT

    result = from_sources_in_turn(ask, True, True)

    assert len(asked) == MAX_SOURCES
    assert asked[0] == (True, True) and asked[-1] == (False, False)
    assert result["state"] == "cached"
    # Each call that gave the image back kept KEPT bytes; the last resumed only its own.
    assert result["bytes_downloaded"] == 10 + KEPT * (MAX_SOURCES - 2)
    assert result.get("failed_peers") == [f"h{n}" for n in range(1, MAX_SOURCES)]


def test_a_compute_before_1_7_is_asked_once_when_its_peers_fail() -> None:
    asked: list[tuple[bool, bool]] = []

    def ask(report: bool, hand_back: bool) -> tuple[ImageResult, int]:
        asked.append((report, hand_back))
        return cached_with(bytes_downloaded=10, download_path="http",
                           fallback_reason="peer_failed: h1: cannot connect"), 0

    assert from_sources_in_turn(ask, True, False)["state"] == "cached"
    assert asked == [(True, False)]


@pytest.mark.parametrize("back", [
    ImageResult(state="error", reason="refused", bytes_downloaded=KEPT, bytes_from_peers=KEPT,
                bad_peers=["liar"]),
    gone("dead"),
])
def test_an_error_of_the_next_source_is_final(back: ImageResult) -> None:
    """The merged result names the first call's peers; only the latest call's own reply
    says whether it gave the image back: an ordinary error of the next source (the image
    deleted, Glance down) ends the host's calls."""
    asked: list[tuple[bool, bool]] = []

    def ask(report: bool, hand_back: bool) -> tuple[ImageResult, int]:
        asked.append((report, hand_back))
        if len(asked) == 1:
            return back, 0
        return ImageResult(state="error", reason="image not found", bytes_downloaded=0), 0

    assert from_sources_in_turn(ask, True, True)["reason"] == "image not found"
    assert len(asked) == 2


def test_a_host_back_for_a_source_keeps_its_receivers_counted(conf):
    """h3 streams from h2 (h2's one upload slot); h2 gives the image back and is offered
    again: h3 still counts, so h4 is not given h2 too."""
    plan, serving = planner(conf), Serving()
    plan.assign("h1", site("h1"), IMG, client=serving)
    second = plan.assign("h2", site("h2"), IMG, client=serving)
    third = plan.assign("h3", site("h3"), IMG, client=serving)
    assert (second.source, third.source) == ("h1", "h2")

    plan.finished("h2", site("h2"), IMG, second, gone("h1"), serving)
    assert plan.assign("h2", site("h2"), IMG, client=serving).origin_slot
    fourth = plan.assign("h4", site("h4"), IMG, client=serving)

    assert fourth.source == "h3"  # the free one; h2 has h3 already


def test_a_failed_source_gives_back_its_upload_slot_on_its_own_source_at_once(conf):
    """Cut-through chain h1 (the image service) -> h2 -> h3 -> h4, one upload per source.
    h2 dies; h3 gives the image back naming it. h2's own call has not ended, but the slot it
    held on h1 is free at once: h3 gets h1 rather than waiting for h2's call to end."""
    conf.set_override("peer_wait_timeout", 0, group="image_cache")
    plan, serving = planner(conf), Serving()
    hosts = ["h1", "h2", "h3", "h4"]
    assigned = {h: plan.assign(h, site(h), IMG, client=serving) for h in hosts}
    assert [assigned[h].source for h in hosts] == [None, "h1", "h2", "h3"]

    plan.finished("h3", site("h3"), IMG, assigned["h3"], gone("h2"), serving)
    again = plan.assign("h3", site("h3"), IMG, client=serving)

    assert again.source == "h1" and again.reason is None


def test_a_failed_source_whose_call_ends_later_gives_its_slot_back_only_once(conf):
    """After h2 failed (its slot on h1 given back at once) and h3 took h1, h2's call ending
    does not free h1's one slot a second time: h1 stays h3's alone."""
    conf.set_override("peer_wait_timeout", 0, group="image_cache")
    plan, serving = planner(conf), Serving()
    hosts = ["h1", "h2", "h3", "h4"]
    assigned = {h: plan.assign(h, site(h), IMG, client=serving) for h in hosts}
    plan.finished("h3", site("h3"), IMG, assigned["h3"], gone("h2"), serving)
    assert plan.assign("h3", site("h3"), IMG, client=serving).source == "h1"

    plan.finished("h2", site("h2"), IMG, assigned["h2"], None, serving)

    # h4's download (fed by h3) is the only free source (h5 not offered in turn); then
    # every source is full.
    assert plan.assign("h5", site("h5"), IMG).source == "h4"
    sixth = plan.assign("h6", site("h6"), IMG)
    assert sixth.source is None and sixth.reason is not None
