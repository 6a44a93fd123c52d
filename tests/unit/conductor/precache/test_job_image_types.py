"""Pre-cache targeting reuses the image-type request filter: a host whose provider lacks an
image's format trait is ``unsupported`` for that image, and is not asked for it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fleetcache.common.db import jobs
from fleetcache.conductor.precache import notifications
from fleetcache.conductor.precache.precacher import Precacher
from fleetcache.conductor.scheduler.image_support import ImageTypeSupport
from fleetcache.image.source import ImageMeta
from tests.unit.conductor.precache.test_job import (
    IMG_A,
    IMG_B,
    FakeComputes,
    FakeImages,
    _ctxt,
    make_aggregate,
    pools,  # noqa: F401 - the fixture
    results_by_host,
)


class FormatImages(FakeImages):
    def show(self, ctxt: Any, image_id: str) -> ImageMeta:
        super().show(ctxt, image_id)
        return ImageMeta(id=image_id, disk_format="qcow2" if image_id == IMG_A else "raw")


class LacksQcow2:
    """Stands in for ImageTypeSupport: h2 lacks COMPUTE_IMAGE_TYPE_QCOW2, h3 lacks both."""

    def unsupported(self, aggregate_uuid: str, hosts: Sequence[str],
                    images: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
        assert images[IMG_A]["disk_format"] == "qcow2"
        return {"h2": {IMG_A: "host lacks trait COMPUTE_IMAGE_TYPE_QCOW2"},
                "h3": {IMG_A: "host lacks trait COMPUTE_IMAGE_TYPE_QCOW2",
                       IMG_B: "host lacks trait COMPUTE_IMAGE_TYPE_RAW"}}


def test_hosts_lacking_the_format_trait_are_unsupported_without_a_call(conf, db, pools):  # noqa: F811
    agg_id = make_aggregate(db, ["h1", "h2", "h3"])
    computes = FakeComputes()
    precacher = Precacher(
        conf, db, "conductor1", clients=computes, images=FormatImages(),
        notifier=notifications.CacheNotifier(None),
        host_calls=pools.host_calls(conf.image_cache.precache_concurrency),
        job_runner=lambda f: f(), image_support=LacksQcow2(),  # type: ignore[arg-type]
    )

    job = precacher.start(_ctxt(), agg_id, [IMG_A, IMG_B])

    assert jobs.job_get(db, job["uuid"])["state"] == jobs.DONE
    assert sorted(computes.calls) == [("h1", [IMG_A, IMG_B]), ("h2", [IMG_B])]
    results = results_by_host(db, job["uuid"])
    assert results["h1"] == {IMG_A: ("cached", None), IMG_B: ("cached", None)}
    assert results["h2"] == {
        IMG_A: ("unsupported", "host lacks trait COMPUTE_IMAGE_TYPE_QCOW2"),
        IMG_B: ("cached", None)}
    assert {state for state, _ in results["h3"].values()} == {"unsupported"}


def test_image_type_support_asks_placement_once_per_format() -> None:
    class Client:
        def __init__(self) -> None:
            self.queries: list[dict[str, str]] = []

        def list_providers(self, **query: str) -> list[dict[str, Any]]:
            from fleetcache.conductor.placement import provider_uuid
            self.queries.append(query)
            return [{"uuid": provider_uuid("h2")}] if "QCOW2" in query["required"] else []

    client = Client()
    support = ImageTypeSupport(client)  # type: ignore[arg-type]
    images = {"a": {"disk_format": "qcow2"}, "b": {"disk_format": "qcow2"},
              "c": {"disk_format": "raw"}, "d": {"disk_format": "weird"}}
    result = support.unsupported("agg-uuid", ["h1", "h2"], images)
    assert result == {"h2": {"a": "host lacks trait COMPUTE_IMAGE_TYPE_QCOW2",
                             "b": "host lacks trait COMPUTE_IMAGE_TYPE_QCOW2"}}
    assert client.queries == [
        {"member_of": "agg-uuid", "required": "!COMPUTE_IMAGE_TYPE_QCOW2"},
        {"member_of": "agg-uuid", "required": "!COMPUTE_IMAGE_TYPE_RAW"}]
