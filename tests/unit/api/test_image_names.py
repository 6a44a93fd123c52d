"""The status page's image names: looked up once, kept, failures remembered, and a slow image
service never holding a render longer than its wait."""

from __future__ import annotations

import threading
import time

from fleetcache.api import image_names
from fleetcache.api.image_names import ImageNames
from fleetcache.common import exception
from fleetcache.common.context import RequestContext

CTXT = RequestContext(is_admin=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Source:
    """Answers from ``names``; an id not in it is unknown (``ImageNotFound``)."""

    def __init__(self, names: dict[str, str | None]) -> None:
        self.names = names
        self.asked: list[str] = []
        self.release = threading.Event()
        self.release.set()

    def __call__(self, ctxt: RequestContext, image_id: str) -> str | None:
        self.asked.append(image_id)
        assert ctxt is CTXT  # the request's context: its token reaches the image service
        self.release.wait(10)
        if image_id not in self.names:
            raise exception.ImageNotFound(image_id=image_id)
        return self.names[image_id]


def test_names_are_looked_up_once_and_kept_until_their_ttl() -> None:
    clock, source = Clock(), Source({"a": "cirros", "b": "ubuntu"})
    names = ImageNames(source, clock=clock)
    assert names.get(CTXT, ["a", "b", "a"], wait=5) == {"a": "cirros", "b": "ubuntu"}
    clock.now += image_names.NAME_TTL - 1
    source.names["a"] = "renamed"
    assert names.get(CTXT, ["a"], wait=5) == {"a": "cirros"}
    assert sorted(source.asked) == ["a", "b"]
    clock.now += 1
    assert names.get(CTXT, ["a"], wait=5) == {"a": "renamed"}
    assert sorted(source.asked) == ["a", "a", "b"]


def test_an_unknown_or_unnamed_image_is_left_out_and_asked_again_only_after_a_while() -> None:
    clock, source = Clock(), Source({"nameless": None})
    names = ImageNames(source, clock=clock)
    assert names.get(CTXT, ["gone", "nameless"], wait=5) == {}
    assert names.get(CTXT, ["gone", "nameless"], wait=5) == {}
    assert sorted(source.asked) == ["gone", "nameless"]
    clock.now += image_names.RETRY_AFTER
    source.names["gone"] = "back"
    assert names.get(CTXT, ["gone"], wait=5) == {"gone": "back"}


def test_any_error_of_the_lookup_means_the_id_is_shown() -> None:
    def broken(ctxt: RequestContext, image_id: str) -> str | None:
        raise RuntimeError("no image source configured")

    assert ImageNames(broken).get(CTXT, ["a"], wait=5) == {}


def test_a_slow_image_service_holds_a_render_no_longer_than_its_wait() -> None:
    source = Source({"a": "cirros"})
    source.release.clear()  # the image service does not answer
    names = ImageNames(source)
    started = time.monotonic()
    assert names.get(CTXT, ["a"], wait=0.2) == {}
    assert time.monotonic() - started < 2
    assert names.get(CTXT, ["a"], wait=0.05) == {}  # still in flight: not asked twice
    assert source.asked == ["a"]
    source.release.set()  # the answer arrives after the render: the next one has it
    assert names.get(CTXT, ["a"], wait=5) == {"a": "cirros"}
    assert source.asked == ["a"]
