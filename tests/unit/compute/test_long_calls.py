"""Unit tests of the compute's long-call admission (fleetcache.compute.long_calls) and of the
manager answering a long call over ``[compute] max_concurrent_long_calls`` at once."""

from __future__ import annotations

import pathlib
import uuid

import oslo_messaging as messaging
import pytest

from fleetcache.common import exception, rpc
from fleetcache.compute import long_calls
from fleetcache.compute.long_calls import LongCallSlots
from fleetcache.compute.manager import ComputeManager
from fleetcache.compute.virt.disk import DiskDriver
from fleetcache.image.local import LocalImageSource
from tests.unit.compute.diskfixtures import CTXT, Host
from tests.unit.image.fixtures import make_conf


def test_slots_admit_up_to_the_limit_refuse_the_next_and_free_on_exit() -> None:
    slots = LongCallSlots(2, "h1")
    with slots.hold("cache_images"), slots.hold("cache_images"):
        with pytest.raises(exception.ComputeBusy) as caught, slots.hold("create_instance_disk"):
            pass
        message = str(caught.value)
        assert "h1" in message and "create_instance_disk" in message
        assert "max_concurrent_long_calls" in message
    with slots.hold("cache_images"), slots.hold("cache_images"):
        pass  # both slots came back


def test_a_failing_call_gives_its_slot_back() -> None:
    slots = LongCallSlots(1, "h1")
    with pytest.raises(RuntimeError), slots.hold("cache_images"):
        raise RuntimeError("download broke")
    with slots.hold("cache_images"):
        pass


def _manager(tmp_path: pathlib.Path) -> tuple[Host, ComputeManager]:
    host = Host(tmp_path, host="compute-1", compute__max_concurrent_long_calls=1)
    return host, ComputeManager(host.conf, DiskDriver(host.conf, LocalImageSource(host.conf)))


def test_cache_images_over_the_limit_answers_every_image_error_without_fetching(
    tmp_path: pathlib.Path,
) -> None:
    host, manager = _manager(tmp_path)
    image = host.add_raw()
    with manager.long_calls.hold("cache_images"):  # another long call holds the only slot
        results = manager.cache_images(CTXT, [image, "other"])
    assert set(results) == {image, "other"}
    for result in results.values():
        assert result["state"] == "error" and result["bytes_downloaded"] == 0
        assert "busy" in (result["reason"] or "")
    assert not host.base(image).exists()
    assert manager.cache_images(CTXT, [image])[image]["state"] == "cached"  # slot free again


def test_create_instance_disk_over_the_limit_raises_compute_busy(tmp_path: pathlib.Path) -> None:
    host, manager = _manager(tmp_path)
    image = host.add_raw()
    with manager.long_calls.hold("cache_images"), pytest.raises(
            messaging.ExpectedException) as caught:
        manager.create_instance_disk(CTXT, str(uuid.uuid4()), image)
    assert isinstance(caught.value.exc_info[1], exception.ComputeBusy)
    assert not host.base(image).exists()


def test_the_limit_leaves_one_worker_free_and_says_when_it_lowers_it() -> None:
    conf = make_conf()
    rpc.register_opts(conf)
    conf.set_override("executor_thread_pool_size", 32)
    assert (long_calls.effective_limit(conf), long_calls.limit_problem(conf)) == (24, None)
    conf.set_override("executor_thread_pool_size", 8)
    assert long_calls.effective_limit(conf) == 7
    assert "7 long calls are admitted" in (long_calls.limit_problem(conf) or "")
    conf.set_override("executor_thread_pool_size", 1)
    with pytest.raises(exception.InvalidConfiguration, match="at least 2"):
        long_calls.effective_limit(conf)
