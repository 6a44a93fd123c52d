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
from oslo_concurrency import processutils

from fleetcache.common import exception
from fleetcache.compute.imagebackend import backends
from fleetcache.compute.imagecache import CachedImage, cache_name
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


class Reports:
    """The report function the service would inject; keeps what it was given."""

    def __init__(self) -> None:
        self.sent: list[tuple[list[CachedImage], int]] = []

    def __call__(self, images: list[CachedImage], usage_bytes: int) -> None:
        self.sent.append((images, usage_bytes))


def _manager(tmp_path: pathlib.Path, reports: Reports | None = None,
             **overrides: Any) -> tuple[Host, ComputeManager]:
    host = Host(tmp_path, host="compute-1", **overrides)
    driver = DiskDriver(host.conf, LocalImageSource(host.conf))
    return host, ComputeManager(host.conf, driver, reports)


def test_create_and_delete_instance_disk(tmp_path: pathlib.Path) -> None:
    reports = Reports()
    host, manager = _manager(tmp_path, reports)
    image, instance = host.add_raw(), str(uuid.uuid4())
    result = manager.create_instance_disk(CTXT, instance, image)
    assert (result["backend"], result["image_fetched"]) == ("qcow2", True)
    assert [[i["image_id"] for i in images] for images, _ in reports.sent] == [
        [image]]  # a fetch changed the cache: reported
    manager.create_instance_disk(CTXT, str(uuid.uuid4()), image)
    assert len(reports.sent) == 1  # a hit did not
    assert manager.delete_instance_disk(CTXT, instance) is True


def test_errors_are_expected_exceptions(tmp_path: pathlib.Path) -> None:
    _host, manager = _manager(tmp_path)
    with raises_expected(exception.InvalidInput):
        manager.create_instance_disk(CTXT, "../etc", "img")
    with raises_expected(exception.ImageNotFound):
        manager.create_instance_disk(CTXT, str(uuid.uuid4()), "no-such-image")
    with raises_expected(exception.InvalidInput):
        manager.delete_instance_disk(CTXT, "../etc")


def test_a_failed_disk_copy_is_an_expected_exception(tmp_path: pathlib.Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk under ``cp`` is the caller's error to report, not a compute traceback."""
    def cp(*args: Any, **kwargs: Any) -> None:
        raise processutils.ProcessExecutionError(
            exit_code=1, stderr="cp: error writing 'disk': No space left on device")

    host, manager = _manager(tmp_path, libvirt__images_type="flat")
    monkeypatch.setattr(backends.processutils, "execute", cp)
    with raises_expected(exception.DiskCreateFailed):
        manager.create_instance_disk(CTXT, str(uuid.uuid4()), host.add_raw())


def test_a_driver_without_image_cache_makes_no_disks(tmp_path: pathlib.Path) -> None:
    conf = make_conf(compute_driver="fake")
    driver = FakeDriver(conf)
    assert driver.image_cache is None  # its cache is in memory
    manager = ComputeManager(conf, driver, Reports())
    with raises_expected(exception.InstanceDisksNotSupported):
        manager.create_instance_disk(CTXT, str(uuid.uuid4()), "img")
    with raises_expected(exception.InstanceDisksNotSupported):
        manager.delete_instance_disk(CTXT, str(uuid.uuid4()))
    assert manager.image_cache_manager_interval() is None
    manager.run_image_cache_manager_pass()  # nothing to do, no error


def test_cache_images_reports_what_the_cache_indexed(tmp_path: pathlib.Path) -> None:
    reports = Reports()
    host, manager = _manager(tmp_path, reports)
    image, existing = host.add_raw(), host.add_raw()
    host.cache.fetch(CTXT, existing)
    results = manager.cache_images(CTXT, [image, existing, "missing"])
    assert [results[i]["state"] for i in (image, existing, "missing")] == [
        "cached", "existing", "error"]
    assert [results[i].get("download_path") for i in (image, existing, "missing")] == [
        "http", None, None]
    assert all(results[i].get("fallback_reason") is None for i in results)
    assert host.index.get(cache_name(image))["image_id"] == image  # type: ignore[index]
    [(images, usage)] = reports.sent
    assert sorted(i["image_id"] for i in images) == sorted([image, existing])
    assert usage == sum(host.base(i).stat().st_blocks * 512 for i in (image, existing))


def test_periodic_reports_first_then_ages(tmp_path: pathlib.Path) -> None:
    reports = Reports()
    host, manager = _manager(tmp_path, reports,
                             image_cache__remove_unused_original_minimum_age_seconds=0)
    image = host.add_raw()
    manager.cache_images(CTXT, [image])
    assert manager.image_cache_manager_interval() == 2400.0
    manager.run_image_cache_manager_pass()  # start-up: report only
    assert host.base(image).exists() and len(reports.sent) == 2
    manager.run_image_cache_manager_pass()
    assert not host.base(image).exists()
    assert reports.sent[-1] == ([], 0)


def test_get_host_uptime_is_the_hosts(tmp_path: pathlib.Path) -> None:
    _, manager = _manager(tmp_path)
    assert " up " in manager.get_host_uptime(CTXT)
    assert "load average: " in manager.get_host_uptime(CTXT)
