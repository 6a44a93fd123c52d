"""Tests of fleetcache.cmd.heap: what exists when a daemon has started is left out of later
garbage collections, and what it allocates afterwards is still collected."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_startup_objects_are_frozen_and_later_cycles_still_collected() -> None:
    # In a child process: freezing is process-wide, and this test process's heap must stay
    # collectable.
    script = textwrap.dedent("""
        import gc, weakref
        from fleetcache.cmd import heap

        class Node:
            pass

        def cycle():
            a, b = Node(), Node()
            a.other, b.other = b, a
            return weakref.ref(a)

        kept = cycle()          # garbage already at start-up: collected, not frozen
        frozen = heap.freeze_startup_heap()
        assert kept() is None, "start-up garbage was frozen instead of collected"
        assert frozen == gc.get_freeze_count() > 1000, frozen
        assert gc.isenabled()
        later = cycle()         # garbage made after start-up: collected as before
        gc.collect()
        assert later() is None
        print("ok", frozen)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")
