"""Unit tests of the compute RPC endpoint's instance disk and image cache methods
(fleetcache.compute.manager); ``cache_images`` itself is covered functionally."""

from __future__ import annotations

import contextlib
import pathlib
import uuid
from collections.abc import Iterator
from typing import Any

import oslo_messaging as messaging
import pytest

from fleetcache.common import exception
from fleetcache.compute.imagecache import cache_name
from fleetcache.compute.manager import ComputeManager
from fleetcache.compute.virt.disk import DiskDriver
from fleetcache.compute.virt.fake import FakeDriver
from fleetcache.image.local import LocalImageSource
from tests.unit.compute.diskfixtures import CTXT, Host
from tests.unit.image.fixtures import make_conf


@contextlib.contextmanager
def raises_expected(exc_type: type[Exception]) -> Iterator[None]:
    with pytest.raises(messaging.ExpectedException) as caught:
        yield
    assert isinstance(caught.value.exc_info[1], exc_type)


class FakeConductor:
    def __init__(self, capped: bool = False) -> None:
        self.capped = capped
        self.reports: list[tuple[str, list[Any], int]] = []

    def report_image_cache(self, ctxt: Any, host: str, images: list[Any], usage: int) -> None:
        if self.capped:
            raise exception.RPCVersionCapped(topic="conductor", cap="1.0",
                                             method="report_image_cache", version="1.1")
        self.reports.append((host, images, usage))


def _manager(tmp_path: pathlib.Path, conductor: FakeConductor | None = None,
             **overrides: Any) -> tuple[Host, ComputeManager]:
    host = Host(tmp_path, host="compute-1", **overrides)
    driver = DiskDriver(host.conf, LocalImageSource(host.conf))
    return host, ComputeManager(host.conf, driver, conductor)  # type: ignore[arg-type]


def test_create_and_delete_instance_disk(tmp_path: pathlib.Path) -> None:
    conductor = FakeConductor()
    host, manager = _manager(tmp_path, conductor)
    image, instance = host.add_raw(), str(uuid.uuid4())
    result = manager.create_instance_disk(CTXT, instance, image)
    assert (result["backend"], result["image_fetched"]) == ("qcow2", True)
    assert [(h, [i["image_id"] for i in images]) for h, images, _ in conductor.reports] == [
        ("compute-1", [image])]  # a fetch changed the cache: reported
    manager.create_instance_disk(CTXT, str(uuid.uuid4()), image)
    assert len(conductor.reports) == 1  # a hit did not
    assert manager.delete_instance_disk(CTXT, instance) is True


def test_errors_are_expected_exceptions(tmp_path: pathlib.Path) -> None:
    _host, manager = _manager(tmp_path)
    with raises_expected(exception.InvalidInput):
        manager.create_instance_disk(CTXT, "../etc", "img")
    with raises_expected(exception.ImageNotFound):
        manager.create_instance_disk(CTXT, str(uuid.uuid4()), "no-such-image")
    with raises_expected(exception.InvalidInput):
        manager.delete_instance_disk(CTXT, "../etc")


def test_a_driver_without_image_cache_makes_no_disks(tmp_path: pathlib.Path) -> None:
    conf = make_conf(compute_driver="fake")
    manager = ComputeManager(conf, FakeDriver(conf))
    with raises_expected(exception.InstanceDisksNotSupported):
        manager.create_instance_disk(CTXT, str(uuid.uuid4()), "img")
    with raises_expected(exception.InstanceDisksNotSupported):
        manager.delete_instance_disk(CTXT, str(uuid.uuid4()))
    assert manager.image_cache_manager_interval() is None
    manager.run_image_cache_manager_pass()  # nothing to do, no error


def test_cache_images_indexes_and_reports(tmp_path: pathlib.Path) -> None:
    conductor = FakeConductor()
    host, manager = _manager(tmp_path, conductor)
    image = host.add_raw()
    results = manager.cache_images(CTXT, [image, "missing"])
    assert results[image]["state"] == "cached" and results["missing"]["state"] == "error"
    assert host.index.get(cache_name(image))["image_id"] == image  # type: ignore[index]
    [(_host, images, usage)] = conductor.reports
    assert [i["image_id"] for i in images] == [image]
    assert usage == host.base(image).stat().st_blocks * 512


def test_a_capped_conductor_is_warned_about_once(tmp_path: pathlib.Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    conductor = FakeConductor(capped=True)
    host, manager = _manager(tmp_path, conductor)
    manager.cache_images(CTXT, [host.add_raw()])
    manager.cache_images(CTXT, [host.add_raw()])
    assert sum("Not reporting the image cache" in r.message for r in caplog.records) == 1


def test_periodic_reports_first_then_ages(tmp_path: pathlib.Path) -> None:
    conductor = FakeConductor()
    host, manager = _manager(tmp_path, conductor,
                             image_cache__remove_unused_original_minimum_age_seconds=0)
    image = host.add_raw()
    manager.cache_images(CTXT, [image])
    assert manager.image_cache_manager_interval() == 2400.0
    manager.run_image_cache_manager_pass()  # start-up: report only
    assert host.base(image).exists() and len(conductor.reports) == 2
    manager.run_image_cache_manager_pass()
    assert not host.base(image).exists()
    assert conductor.reports[-1][1:] == ([], 0)
