"""Reads of kombu's cached properties without kombu's class-wide lock.

kombu (5.3.3 on, PR celery/kombu#1811; 5.7.0 here) wraps every read of its
``kombu.utils.objects.cached_property`` in ``with self.lock``, where the lock belongs to the
descriptor, that is to the class: one ``RLock`` per property shared by every instance in the
process. Because that descriptor also defines ``__set__`` and ``__delete__``, a value already
cached in the instance's ``__dict__`` does not bypass it, so every read takes the lock. Every
publish of oslo.messaging's rabbit driver goes through ``kombu.Connection.ensure``, which reads
``recoverable_connection_errors`` and ``recoverable_channel_errors``: every thread of the process
that publishes (RPC workers sending replies, callers sending requests, the notifier) queues on
the same two locks. A thread holding one can lose the GIL inside it, and the others then sleep
on the lock's futex: with hundreds of threads the process falls into a lock convoy. CPython
removed the same class-wide lock from ``functools.cached_property`` in 3.12 for this reason
(python/cpython gh-87634).

Measured with ``bench/fanout.py`` at 1,000 hosts (docs/performance.md, "The kombu lock
convoy"): shards of 100 fake computes spent 28-42 ms of CPU per bare call (against 4-5 ms on a
quiet run), most of it system time, with 80 runnable threads in one process and a load average
over 200; the same rounds ran 3-4 times slower than the quiet ones.

:func:`read_cached_properties_without_lock` makes a read of a value already cached return it
without the lock; computing, setting and deleting a value still take it. A read racing a delete
may return the old value, as ``functools.cached_property`` does in Python 3.12.
"""

from __future__ import annotations

from typing import Any

from kombu.utils import objects

_MISSING = object()


def read_cached_properties_without_lock() -> None:
    """Patch ``kombu.utils.objects.cached_property.__get__`` (once per process; idempotent).

    Called by :func:`fleetcache.common.rpc.init`, which every service runs at start-up before
    it opens a transport.
    """
    cls: Any = objects.cached_property
    if getattr(cls.__get__, "_fleetcache_lock_free", False):
        return
    locked_get = cls.__get__

    def __get__(self: Any, instance: Any, owner: Any = None) -> Any:
        if instance is not None:
            try:
                value = instance.__dict__.get(self.attrname, _MISSING)
            except AttributeError:  # no __dict__: let kombu's own code say so
                value = _MISSING
            if value is not _MISSING:
                return value
        return locked_get(self, instance, owner)

    __get__._fleetcache_lock_free = True  # type: ignore[attr-defined]
    cls.__get__ = __get__
