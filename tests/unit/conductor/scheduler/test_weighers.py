"""Weighers: normalised as Nova's, multipliers from options, the cached-image weigher puts
hosts holding the image first."""

from __future__ import annotations

from oslo_config import cfg

from fleetcache.common.db import host_images
from fleetcache.common.db.session import Database
from fleetcache.conductor.scheduler.weighers import (
    CachedImageWeigher,
    DiskWeigher,
    RAMWeigher,
    load_weighers,
    normalise,
    weigh,
)
from tests.unit.conductor.scheduler.helpers import host, request, spec


def test_normalise_like_nova() -> None:
    assert normalise([]) == []
    assert normalise([5, 5]) == [0.0, 0.0]
    assert normalise([0, 5, 10]) == [0.0, 0.5, 1.0]


def test_ram_weigher_spreads_and_negative_multiplier_stacks(
    conf: cfg.ConfigOpts, db: Database
) -> None:
    hosts = [host("small", ram=1024), host("big", ram=8192), host("mid", ram=4096)]
    req = request(spec())
    assert [h.host for h in weigh([RAMWeigher(conf, db)], hosts, req)] == ["big", "mid", "small"]
    conf.set_override("ram_weight_multiplier", -1.0, group="filter_scheduler")
    assert [h.host for h in weigh([RAMWeigher(conf, db)], hosts, req)] == ["small", "mid", "big"]


def test_ram_weigher_counts_used(conf: cfg.ConfigOpts, db: Database) -> None:
    hosts = [host("a", ram=8192, used_ram=8000), host("b", ram=4096)]
    assert weigh([RAMWeigher(conf, db)], hosts, request(spec()))[0].host == "b"


def test_disk_weigher(conf: cfg.ConfigOpts, db: Database) -> None:
    hosts = [host("a", disk=10), host("b", disk=100)]
    assert weigh([DiskWeigher(conf, db)], hosts, request(spec()))[0].host == "b"


def test_cached_image_first_over_free_resources(conf: cfg.ConfigOpts, db: Database) -> None:
    host_images.set_host_images(db, "cached", [{"image_id": "img", "size": 1,
                                                "last_used": 1.0}], 1)
    host_images.set_host_images(db, "other", [{"image_id": "other-img", "size": 1,
                                               "last_used": 1.0}], 1)
    hosts = [host("roomy", ram=65536, disk=1000), host("cached", ram=1024, disk=10),
             host("other", ram=2048, disk=20)]
    order = weigh(load_weighers(conf, db), hosts, request(spec({"id": "img"})))
    assert [h.host for h in order] == ["cached", "roomy", "other"]
    conf.set_override("cached_image_weight_multiplier", 0.0, group="filter_scheduler")
    order = weigh(load_weighers(conf, db), hosts, request(spec({"id": "img"})))
    assert order[0].host == "roomy"


def test_default_weighers_are_all_three(conf: cfg.ConfigOpts, db: Database) -> None:
    assert {type(w) for w in load_weighers(conf, db)} == {
        CachedImageWeigher, RAMWeigher, DiskWeigher}
