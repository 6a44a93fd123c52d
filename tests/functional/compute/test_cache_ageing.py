"""Cache ageing end to end (``fake://``, SQLite, the disk driver, ages in seconds): unused
images go, images backing a disk stay, a pre-cache touch keeps an image, a download under way
is untouched, and the conductor's ``host_images`` follows every report."""

from __future__ import annotations

import os
import pathlib
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from fleetcache.compute.imagecache import PART_MARK, cache_name
from tests.functional.compute.stack import CTXT, Stack
from tests.waiting import wait_for

MAX_AGE = 2


def _age(path: pathlib.Path, seconds: float = MAX_AGE + 5) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when))


@pytest.fixture
def stack(tmp_path: pathlib.Path) -> Iterator[Stack]:
    stack = Stack(tmp_path, **{
        "image_cache.manager_interval": -1,  # the test runs the passes itself
        "image_cache.remove_unused_original_minimum_age_seconds": MAX_AGE,
    })
    stack.manager.run_image_cache_manager_pass()  # the start-up run only reports
    yield stack
    stack.stop()


def test_unused_go_backing_stays_touched_stays(stack: Stack) -> None:
    unused, backing, touched, unused2 = (stack.add_raw() for _ in range(4))
    stack.api.cache_images(CTXT, stack.host, [unused, touched, unused2])
    stack.api.create_instance_disk(CTXT, stack.host, str(uuid.uuid4()), backing)
    for image in (unused, backing, touched, unused2):
        _age(stack.base(image))
    wait_for(lambda: stack.reported_ids() == {unused, backing, touched, unused2},
             "the report of the four images")

    again = stack.api.cache_images(CTXT, stack.host, [touched])  # pre-cache renews the lease
    assert again[touched]["state"] == "existing"
    stack.manager.run_image_cache_manager_pass()

    assert not stack.base(unused).exists() and not stack.base(unused2).exists()
    assert stack.base(backing).exists() and stack.base(touched).exists()
    wait_for(lambda: stack.reported_ids() == {backing, touched}, "the report after the pass")
    cache = stack.reported()
    assert cache is not None
    assert cache["usage_bytes"] == sum(stack.base(i).stat().st_blocks * 512
                                       for i in (backing, touched))


def test_a_download_under_way_is_untouched(stack: Stack) -> None:
    image = stack.add_raw()
    data = pathlib.Path(stack.images_dir, image)
    content = data.read_bytes()
    data.unlink()
    os.mkfifo(data)  # the download blocks until the test writes the image's bytes
    result: dict[str, object] = {}
    caching = threading.Thread(
        target=lambda: result.update(stack.api.cache_images(CTXT, stack.host, [image])))
    caching.start()
    base_dir = stack.base(image).parent
    [partial] = wait_for(lambda: [p for p in base_dir.iterdir()
                                  if p.name.startswith(f".{cache_name(image)}{PART_MARK}")],
                         "the download to start")
    _age(partial)

    stack.manager.run_image_cache_manager_pass()

    assert partial.exists()
    with open(data, "wb") as fifo:
        fifo.write(content)
    caching.join(30)
    assert result[image]["state"] == "cached"  # type: ignore[index]
    assert stack.base(image).read_bytes() == content


def test_the_periodic_task_runs_the_pass(tmp_path: pathlib.Path) -> None:
    stack = Stack(tmp_path, **{
        "image_cache.manager_interval": 1,
        "image_cache.remove_unused_original_minimum_age_seconds": MAX_AGE,
    })
    try:
        image = stack.add_raw()
        stack.api.cache_images(CTXT, stack.host, [image])
        _age(stack.base(image))
        wait_for(lambda: not stack.base(image).exists(), "the periodic pass", timeout=15)
        wait_for(lambda: stack.reported() and not stack.reported_ids(), "an empty report")
    finally:
        stack.stop()
