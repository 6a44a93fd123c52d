"""Pinning with a TTL on the real stack (issue 10, "Keep what was asked for").

compute1 is restarted with an ageing pass every second and a minimum age of one second, so an
unused base goes within a few seconds. Two sample images are pre-cached on it through the API
in two jobs: one with ``"fleetcache:pin_seconds": PIN``, one without. The unpinned base is
removed by the ageing pass within seconds; the pinned one is still there after several passes,
until its pin ends, and is removed by the next passes after that.
"""

from __future__ import annotations

import time

import pytest

from tests.integration.stackops import cached_file, precache_and_wait
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

HOST = "compute1"
PIN = 20
AGEING = "[image_cache]\nmanager_interval = 1\nremove_unused_original_minimum_age_seconds = 1\n"


def test_pinned_base_outlives_ageing_until_its_ttl_then_goes(stack, make_aggregate):
    pinned, unpinned = stack.sample_images[:2]
    with stack.compute_options(HOST, "pin-ageing", AGEING):
        for image_id in (pinned, unpinned):
            cached_file(stack, HOST, image_id).unlink(missing_ok=True)
        agg = make_aggregate(hosts=(HOST,))
        pinned_at = time.monotonic()  # the pin runs from the job's creation, a bit later
        job = precache_and_wait(stack, agg["id"], pinned, PIN)
        assert job["state"] == "done" and job["pin_until"], job
        assert job["hosts"][0]["images"][0]["state"] == "cached", job
        assert precache_and_wait(stack, agg["id"], unpinned, None)["state"] == "done"

        # The unpinned base ages out within seconds; the pinned one stays meanwhile.
        wait_for(lambda: not cached_file(stack, HOST, unpinned).exists(),
                 "the ageing pass to remove the unpinned base", 15)
        assert cached_file(stack, HOST, pinned).exists()
        # Several more passes before the pin ends: it is still there.
        time.sleep(max(0.0, PIN - 3 - (time.monotonic() - pinned_at)))
        assert cached_file(stack, HOST, pinned).exists(), \
            "the pinned base went before its pin ended"

        # After the pin: removed as usual by the next passes.
        wait_for(lambda: not cached_file(stack, HOST, pinned).exists(),
                 "the ageing pass to remove the base once its pin ended", 30)
        assert time.monotonic() - pinned_at >= PIN
