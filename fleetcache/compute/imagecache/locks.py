"""The locks of a compute's cache files and instance disks: a thread lock shared by every user
of one lock directory in this process, then an inter-process file lock (oslo.concurrency).

The file lock (``fcntl``) excludes other processes only, never the threads of this one; and
it is released by the close of *any* of the process's descriptors of its file, so a second
thread holding it too would lose it when the first let go. So the thread lock must be the
same for every user of one directory in this process, however its path is spelt (a symlink,
a bind mount): it is keyed by the directory's device and inode. It must not be shared with
other directories: oslo.concurrency's default keeps one thread lock per lock *name* for the
whole process, so several computes in one process (``fleetcache demo``) shared each image's
lock. With peer distribution one compute then held it while it received the image from a
second, which waited for that same lock before it could fetch the bytes to send: the job
never ended.
"""

from __future__ import annotations

import os
import threading
from contextlib import AbstractContextManager
from typing import Any

from oslo_concurrency import lockutils

from fleetcache.compute.imagecache.layout import LOCK_PREFIX

#: The thread locks of each lock directory (by device and inode) this process has locked
#: in. It mirrors state the kernel keeps per process too: the ``fcntl`` locks it holds.
_THREAD_LOCKS: dict[tuple[int, int], lockutils.Semaphores] = {}
_GUARD = threading.Lock()


def _thread_locks(lock_path: str) -> lockutils.Semaphores:
    """The thread locks of the names locked in ``lock_path`` (created if missing), in this
    process."""
    try:
        found = os.stat(lock_path)
    except FileNotFoundError:  # the first lock before the cache made its directories
        os.makedirs(lock_path, exist_ok=True)
        found = os.stat(lock_path)
    key = (found.st_dev, found.st_ino)
    with _GUARD:
        semaphores = _THREAD_LOCKS.get(key)
        if semaphores is None:
            semaphores = _THREAD_LOCKS[key] = lockutils.Semaphores()
        return semaphores


def named_lock(lock_path: str, name: str, blocking: bool = True) -> AbstractContextManager[Any]:
    """The lock of ``name`` (a cache file's name, ``instance-<uuid>``), its file in
    ``lock_path``: against the threads of this process and other processes.

    :raises AcquireLockFailedException: on entry, when not ``blocking`` and it is held.
    """
    return lockutils.lock(name, lock_file_prefix=LOCK_PREFIX, external=True,
                          lock_path=lock_path, semaphores=_thread_locks(lock_path),
                          blocking=blocking)
