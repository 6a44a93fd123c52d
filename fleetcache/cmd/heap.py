"""Keep the garbage collector's full passes off what a daemon built at start-up.

A daemon's start-up (oslo.config, oslo.messaging, SQLAlchemy's mappers, the Placement and
scheduler modules...) leaves well over a hundred thousand objects the cyclic garbage
collector tracks and that live as long as the process. CPython's full (generation 2)
collection walks all of them every time it runs, and a busy daemon allocates enough for it
to run again and again.

NOTE: measured in ``fleetcache-conductor`` under ``bench/fanout.py --hosts 1000 --concurrency
64`` (gc callbacks timing each collection): the full collections were most of the
collector's CPU, and freezing the start-up heap cut the collector's time by more than half
(docs/performance.md, "The garbage collector and the start-up heap").
``gc.freeze()`` (Python 3.7+) moves every object alive at that moment into a permanent
generation that no collection walks; what the daemon allocates afterwards is collected as
before.
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
