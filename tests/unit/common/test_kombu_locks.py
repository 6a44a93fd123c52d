"""Tests of fleetcache.common.kombu_locks: cached kombu properties are read without kombu's
class-wide lock, and still computed, set and deleted under it."""

from __future__ import annotations

import threading

import kombu
from kombu.utils.objects import cached_property

from fleetcache.common import kombu_locks


class _Thing:
    computed = 0

    @cached_property
    def value(self) -> int:
        type(self).computed += 1
        return 42


def _descriptor() -> cached_property:
    return _Thing.__dict__["value"]  # type: ignore[no-any-return]


def test_a_cached_value_is_read_while_another_thread_holds_the_class_lock() -> None:
    kombu_locks.read_cached_properties_without_lock()
    kombu_locks.read_cached_properties_without_lock()  # idempotent
    thing = _Thing()
    assert thing.value == 42  # computed once, under the lock
    held, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        with _descriptor().lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold_lock)
    holder.start()
    held.wait(10)
    try:
        read: list[int] = []
        reader = threading.Thread(target=lambda: read.append(thing.value))
        reader.start()
        reader.join(2)
        assert read == [42], "the read waited for the class-wide lock"
    finally:
        release.set()
        holder.join()
    assert _Thing.computed == 1


def test_computing_setting_and_deleting_keep_their_meaning() -> None:
    kombu_locks.read_cached_properties_without_lock()
    thing = _Thing()
    thing.value = 7
    assert thing.value == 7
    del thing.value
    assert thing.value == 42
    assert _Thing.__dict__["value"].__get__(None, _Thing) is _descriptor()


def test_kombu_connections_read_their_error_classes() -> None:
    kombu_locks.read_cached_properties_without_lock()
    conn = kombu.Connection("memory://")
    first = conn.recoverable_connection_errors
    assert conn.recoverable_connection_errors is first
    conn.release()
