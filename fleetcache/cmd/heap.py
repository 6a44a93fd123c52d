"""Keep the garbage collector's full passes off what a daemon built at start-up.

A daemon's start-up (oslo.config, oslo.messaging, SQLAlchemy's mappers, the Placement and
scheduler modules...) leaves about 160,000 objects the cyclic garbage collector tracks and
that live as long as the process. CPython's full (generation 2) collection walks all of them
every time it runs, and a busy daemon allocates enough for it to run again and again.

NOTE: measured in ``fleetcache-conductor`` under ``bench/fanout.py --hosts 1000 --concurrency
64`` (gc callbacks timing each collection, start-up plus four 1,000-host jobs): 7 full
collections took 0.41 s of CPU, about 59 ms each over 163,000 objects, and the collector 0.76 s
in all, about 0.19 ms per host of the 2.2 ms the conductor spent per host.
``gc.freeze()`` (Python 3.7+) moves every object alive at that moment into a permanent
generation that no collection walks; what the daemon allocates afterwards is collected as
before. docs/performance.md, "Conductor CPU per host (issue 12)", has the figures after it.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Collect the start-up's garbage, then exempt every surviving object from later
    collections. Called once by a daemon's ``main`` when it is built, before it serves.

    :returns: how many objects are now frozen.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
