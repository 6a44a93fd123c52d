"""The virt driver contract, written once and run against every driver (disk, fake)."""

from __future__ import annotations

import concurrent.futures
import io
import pathlib

import pytest

from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import CacheOutcome
from fleetcache.compute.virt.driver import ComputeDriver, load_compute_driver
from fleetcache.image.local import add_image
from tests.unit.image.fixtures import make_conf

CTXT = RequestContext()


@pytest.fixture(params=["disk", "fake"])
def driver_and_image(request: pytest.FixtureRequest,
                     tmp_path: pathlib.Path) -> tuple[ComputeDriver, str]:
    images = tmp_path / "images"
    meta = add_image(str(images), io.BytesIO(b"contract image" * 1000))
    conf = make_conf(compute_driver=request.param, image_source__backend="local",
                     image_source__local_directory=str(images),
                     instances_path=str(tmp_path / "instances"))
    driver = load_compute_driver(conf)
    driver.init_host("host1")
    return driver, meta.id


def test_declares_an_image_cache_and_image_types(
        driver_and_image: tuple[ComputeDriver, str]) -> None:
    caps = driver_and_image[0].get_capabilities()
    assert caps["has_imagecache"] is True
    assert caps["supports_image_type_raw"] is True
    assert caps["supports_image_type_qcow2"] is True


def test_first_cache_is_cached_then_existing(
        driver_and_image: tuple[ComputeDriver, str]) -> None:
    driver, image_id = driver_and_image
    first = driver.cache_image(CTXT, image_id)
    assert isinstance(first, CacheOutcome) and first.downloaded
    assert driver.cache_image(CTXT, image_id) == CacheOutcome(downloaded=False)


def test_overlapping_requests_cache_once(driver_and_image: tuple[ComputeDriver, str]) -> None:
    driver, image_id = driver_and_image
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(lambda _: driver.cache_image(CTXT, image_id), range(4)))
    assert sorted(o.downloaded for o in outcomes) == [False, False, False, True]


def test_capabilities_are_a_copy(driver_and_image: tuple[ComputeDriver, str]) -> None:
    driver = driver_and_image[0]
    driver.get_capabilities()["has_imagecache"] = False
    assert driver.get_capabilities()["has_imagecache"] is True
