"""Serve grants (fleetcache.compute.peers.grants): which job may read which image, until when."""

from __future__ import annotations

from fleetcache.compute.peers.grants import ServeGrants


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_grant_opens_its_images_to_its_job_only() -> None:
    grants = ServeGrants()
    grants.open("job1", "k1", ["img-a", "img-b"], until=10**10)
    assert grants.key_for("job1") == "k1"
    assert grants.allows("job1", "img-a") and grants.allows("job1", "img-b")
    assert not grants.allows("job1", "img-c")
    assert grants.key_for("job2") is None and not grants.allows("job2", "img-a")


def test_grants_expire_per_image_then_per_job() -> None:
    clock = Clock()
    grants = ServeGrants(clock)
    grants.open("job1", "k1", ["img-a"], until=1010)
    grants.open("job1", "k1", ["img-b"], until=1020)
    clock.now = 1010
    assert not grants.allows("job1", "img-a") and grants.allows("job1", "img-b")
    assert grants.key_for("job1") == "k1"
    clock.now = 1020
    assert grants.key_for("job1") is None and grants.jobs() == []


def test_reopening_never_shortens_and_a_new_key_replaces_the_grant() -> None:
    clock = Clock()
    grants = ServeGrants(clock)
    grants.open("job1", "k1", ["img-a"], until=2000)
    grants.open("job1", "k1", ["img-a"], until=1500)
    clock.now = 1600
    assert grants.allows("job1", "img-a")
    grants.open("job1", "k2", ["img-b"], until=3000)
    assert grants.key_for("job1") == "k2"
    assert not grants.allows("job1", "img-a") and grants.allows("job1", "img-b")
