"""The locks of cache files: one per name and lock directory among the threads of a process,
so that several computes in one process (``fleetcache demo``) never wait for each other's."""

from __future__ import annotations

import contextlib
import os
import pathlib
import threading
from collections.abc import Iterator

import pytest
from oslo_concurrency import lockutils

from fleetcache.compute.imagecache import ImageCache, named_lock
from fleetcache.image.local import LocalImageSource
from tests.unit.image.fixtures import make_conf

IMAGE = "0b1e39b4-5d2f-4bb6-9f0c-0d7a1c4f4e2a"


@contextlib.contextmanager
def held_by_another_thread(lock: contextlib.AbstractContextManager[object]) -> Iterator[None]:
    """``lock`` held by a thread of its own for the block."""
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            taken.set()
            done.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(10)
    try:
        yield
    finally:
        done.set()
        thread.join(10)


def free(lock: contextlib.AbstractContextManager[object]) -> bool:
    """Whether this thread could take ``lock`` (a non-blocking one) at once."""
    try:
        with lock:
            return True
    except lockutils.AcquireLockFailedException:
        return False


def free_name(lock_path: str, name: str) -> bool:
    """Whether this thread could take ``name``'s lock in ``lock_path`` at once."""
    return free(named_lock(lock_path, name, blocking=False))


def test_one_name_in_two_directories_is_two_locks(tmp_path: pathlib.Path) -> None:
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    with held_by_another_thread(named_lock(first, "image")):
        assert free_name(second, "image")
        assert not free_name(first, "image")
    assert free_name(first, "image")


def test_one_directory_by_another_path_is_the_same_lock(tmp_path: pathlib.Path) -> None:
    """The file lock would not exclude a thread of this process: the thread lock must be the
    directory's, however it is spelt."""
    real = tmp_path / "locks"
    real.mkdir()
    os.symlink(real, tmp_path / "alias")
    with held_by_another_thread(named_lock(str(real), "image")):
        assert not free_name(str(tmp_path / "alias"), "image")


@pytest.mark.parametrize("same_instances_path", [False, True])
def test_two_caches_share_an_image_lock_only_on_one_directory(
        tmp_path: pathlib.Path, same_instances_path: bool) -> None:
    caches = []
    for host in ("compute1", "compute2"):
        path = tmp_path / ("instances" if same_instances_path else host)
        conf = make_conf(host=host, instances_path=str(path),
                         image_source__local_directory=str(tmp_path / "images"))
        caches.append(ImageCache(conf, LocalImageSource(conf)))
        caches[-1].ensure_dirs()
    with held_by_another_thread(caches[0].lock(IMAGE)):
        taken = free(caches[1].lock(IMAGE, blocking=False))
    assert taken is not same_instances_path
