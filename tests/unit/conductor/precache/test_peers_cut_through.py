"""Unit tests of the peer planner with cut-through (fleetcache.conductor.precache.peers,
``[image_cache] peer_cut_through``): a host is a source from the start of its download, if
it agrees, complete holders before partial ones, and a partial holder whose download did not
end in a served base is no source any more."""

from __future__ import annotations

import time

import pytest
from oslo_config import cfg

from fleetcache.compute.rpcapi import ImageResult
from fleetcache.conductor.precache.peers import Assignment
from tests.unit.conductor.precache.test_peers import (
    IMG,
    Serving,
    cached,
    in_thread,
    peer_conf,
    planner,
    site,
)


@pytest.fixture
def conf() -> cfg.ConfigOpts:
    made = peer_conf()
    made.set_override("peer_max_uploads", 1, group="image_cache")
    return made


def test_a_host_fetching_from_the_image_service_is_a_source_at_once(conf):
    plan, serving = planner(conf), Serving()

    first = plan.assign("h1", site("h1"), IMG, client=serving)
    second = plan.assign("h2", site("h2"), IMG, client=serving)  # no wait for h1 to finish

    assert first == Assignment(origin_slot=True)
    assert second.source == "h1" and [p["host"] for p in second.peers] == ["h1"]
    assert [(host, images) for host, _, images, _ in serving.calls] == [
        ("h1", [IMG]), ("h2", [IMG])]


def test_a_host_offered_later_is_no_source_until_then(conf):
    """``offer_origin=False``: the caller offers the host once it may start (its download
    lease); until then the group's next host waits for a peer, then gets it at once."""
    plan, serving = planner(conf), Serving()

    first = plan.assign("h1", site("h1"), IMG, client=serving, offer_origin=False)
    thread, out = in_thread(lambda: plan.assign("h2", site("h2"), IMG, client=serving))
    time.sleep(0.3)
    assert first == Assignment(origin_slot=True)
    assert serving.calls == [] and out == []

    plan.offer("h1", site("h1"), IMG, serving, first)
    thread.join(5)

    (second,) = out
    assert second.source == "h1" and [p["host"] for p in second.peers] == ["h1"]
    assert [host for host, _, _, _ in serving.calls] == ["h1", "h2"]


def test_a_host_about_to_be_offered_is_waited_for_not_doubled_from_the_image_service(conf):
    """Two image service slots per group: the group's next host waits for the first host's
    offer (as it would have got it as its peer at once) instead of fetching a second copy
    while the first waits for its download lease."""
    conf.set_override("origin_downloads_per_group", 2, group="image_cache")
    conf.set_override("peer_wait_timeout", 2, group="image_cache")
    plan, serving = planner(conf), Serving()

    first = plan.assign("h1", site("h1"), IMG, client=serving, offer_origin=False)
    thread, out = in_thread(lambda: plan.assign("h2", site("h2"), IMG, client=serving))
    time.sleep(0.3)
    assert out == []

    plan.offer("h1", site("h1"), IMG, serving, first)
    thread.join(5)
    assert out[0].source == "h1" and not out[0].origin_slot


def test_a_host_back_for_the_image_service_is_no_source_until_offered_again(conf):
    """h2 (fed by h1) gave the image back and is given the image service: until it has its
    download lease and is offered again, no new receiver is sent to it."""
    plan, serving = planner(conf), Serving()
    plan.assign("h1", site("h1"), IMG, client=serving)
    second = plan.assign("h2", site("h2"), IMG, client=serving)
    plan.finished("h2", site("h2"), IMG, second,
                  ImageResult(state="error", reason="peers gone", bytes_downloaded=0,
                              failed_peers=["h1"]), serving)
    again = plan.assign("h2", site("h2"), IMG, client=serving, offer_origin=False)
    assert again == Assignment(origin_slot=True)

    thread, out = in_thread(lambda: plan.assign("h3", site("h3"), IMG, client=serving))
    time.sleep(0.3)
    assert out == []

    plan.offer("h2", site("h2"), IMG, serving, again)
    thread.join(5)
    assert out[0].source == "h2"


def test_with_one_upload_per_source_the_hosts_form_a_chain(conf):
    plan, serving = planner(conf), Serving()

    sources = [plan.assign(h, site(h), IMG, client=serving).source
               for h in ("h1", "h2", "h3", "h4")]
    fourth = plan.assign("h5", site("h5"), IMG, client=serving)

    assert sources == [None, "h1", "h2", "h3"]
    # The next is given its free predecessor, then the busy ones, least loaded first.
    assert [p["host"] for p in fourth.peers] == ["h4", "h1"]


def test_a_complete_holder_comes_before_a_partial_one_of_equal_load(conf):
    conf.set_override("peer_max_uploads", 2, group="image_cache")
    plan, serving = planner(conf), Serving()
    first = plan.assign("h1", site("h1"), IMG, client=serving)
    to_h2 = plan.assign("h2", site("h2"), IMG, client=serving)
    plan.finished("h1", site("h1"), IMG, first, cached(), serving)

    third = plan.assign("h3", site("h3"), IMG, client=serving)

    # h1 (complete, one receiver) and h2 (partial, none): the least loaded first...
    assert [p["host"] for p in third.peers] == ["h2", "h1"]
    plan.finished("h2", site("h2"), IMG, to_h2, cached(source_host="h1"), serving)
    # ...then, at equal load (none), the complete h1 before the partial h3.
    assert [p["host"] for p in plan.assign("h4", site("h4"), IMG, client=serving).peers] == [
        "h1", "h3"]


def test_a_host_that_refuses_a_download_under_way_is_a_source_once_it_finished(conf):
    plan = planner(conf)
    old = Serving(refuse=("h1",))
    first = plan.assign("h1", site("h1"), IMG, client=old)
    thread, out = in_thread(lambda: plan.assign("h2", site("h2"), IMG, client=Serving()))
    time.sleep(0.3)
    assert out == []  # h1 is no source yet, and the group's image service slot is taken

    plan.finished("h1", site("h1"), IMG, first, cached(), Serving())
    thread.join(5)

    assert out[0].source == "h1"


@pytest.mark.parametrize(("result", "serves"), [
    (None, True),  # the call failed
    (ImageResult(state="error", reason="hash mismatch", bytes_downloaded=0), True),
    (cached(), False),  # cached, but its base is not served (converted)
])
def test_a_partial_holder_whose_download_gave_no_served_base_is_no_source(conf, result,
                                                                          serves):
    plan, serving = planner(conf), Serving()
    first = plan.assign("h1", site("h1"), IMG, client=serving)

    plan.finished("h1", site("h1"), IMG, first, result,
                  serving if serves else Serving(refuse=("h1",)))

    assert plan.assign("h2", site("h2"), IMG) == Assignment(origin_slot=True)


def test_a_partial_holder_that_finished_keeps_its_receivers_counted(conf):
    plan, serving = planner(conf), Serving()
    first = plan.assign("h1", site("h1"), IMG, client=serving)
    plan.assign("h2", site("h2"), IMG, client=serving)

    plan.finished("h1", site("h1"), IMG, first, cached(), serving)
    third = plan.assign("h3", site("h3"), IMG)

    assert third.source == "h2"  # h1's one upload slot is still h2's


def test_without_cut_through_no_host_is_asked_to_serve_before_it_finished(conf):
    conf.set_override("peer_cut_through", False, group="image_cache")
    plan, serving = planner(conf), Serving()

    plan.assign("h1", site("h1"), IMG, client=serving)

    assert serving.calls == []


def existing() -> ImageResult:
    return ImageResult(state="existing", reason=None, bytes_downloaded=0)


def test_a_host_that_lacks_the_image_waits_for_a_reported_holder_whose_call_started(conf):
    """h1's cache report holds the image and its call is under way: h2, which lacks it,
    waits for h1 (as for a host about to be offered) instead of taking the group's image
    service slot, then gets h1 once h1's call ended with the image."""
    plan, serving = planner(conf), Serving()
    plan.expect("h1", site("h1"), IMG)
    thread, out = in_thread(lambda: plan.assign("h2", site("h2"), IMG, client=serving))
    time.sleep(0.3)
    assert out == []

    plan.finished("h1", site("h1"), IMG, Assignment(), existing(), serving)
    thread.join(5)

    assert out[0].source == "h1" and not out[0].origin_slot


def test_a_reported_holder_whose_call_failed_wakes_the_hosts_waiting_for_it(conf):
    """h1's report was wrong or its call failed: h2 is woken at once and takes the group's
    image service slot (not after ``peer_wait_timeout``)."""
    conf.set_override("peer_wait_timeout", 30, group="image_cache")
    plan, serving = planner(conf), Serving()
    plan.expect("h1", site("h1"), IMG)
    thread, out = in_thread(lambda: plan.assign("h2", site("h2"), IMG))
    time.sleep(0.3)
    assert out == []

    plan.finished("h1", site("h1"), IMG, Assignment(), None, serving)
    thread.join(5)

    assert out == [Assignment(origin_slot=True)]
