"""A capped download as Glance sees it, and a download paused at its call's end time then
resumed, on the real stack's Glance.

The cap (``[image_cache] max_download_bytes_per_second``, or a call's ``bytes_per_second``)
must limit the link, not only the compute: Glance's access log gives the bytes and the
duration of each ``GET .../file``, and their quotient must be within 10 % of the cap
(docs/performance.md, "Capped downloads as the image service sees them").
"""

from __future__ import annotations

import os
import pathlib
import statistics
import time
from typing import Any

import pytest

from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache import ImageCache
from fleetcache.compute.imagecache.bandwidth import throttled
from fleetcache.compute.imagecache.terms import DownloadPaused, DownloadTerms
from fleetcache.image.glance import GlanceImageSource
from tests.integration.glance_log import most_counted_for_cut
from tests.integration.stackops import file_gets, raw_image
from tests.unit.image.fixtures import make_conf

pytestmark = pytest.mark.integration
CTXT = RequestContext(request_id="req-integration-pacing")
MiB = 1024 * 1024
CAP = 8 * MiB
#: Downloads per size and way of capping: the figures judged are the median and the worst.
RUNS = 3


def _cache(stack: Any, instances: pathlib.Path, cap: int = 0) -> ImageCache:
    conf = make_conf(instances_path=str(instances), glance__api_servers=[stack.glance_url],
                     **stack.glance_auth_options(),
                     image_cache__max_download_bytes_per_second=cap)
    return ImageCache(conf, throttled(conf, GlanceImageSource(conf)))


def _glance_rates(stack: Any, tmp_path: pathlib.Path, size: int, host_cap: int,
                  terms: DownloadTerms | None) -> list[float]:
    """Glance's view (bytes / its duration, MiB/s) of ``RUNS`` downloads of a new image."""
    rates = []
    with raw_image(stack, os.urandom(size), "pacing") as image:
        for run in range(RUNS):
            cache = _cache(stack, tmp_path / f"instances-{size}-{run}", host_cap)
            before = len(file_gets(stack, image["id"]))
            started = time.monotonic()
            outcome = cache.fetch(CTXT, image["id"], terms=terms)
            compute_seconds = time.monotonic() - started
            assert outcome.downloaded and outcome.bytes_downloaded == size
            gets = file_gets(stack, image["id"], at_least=before + 1)
            assert len(gets) == before + 1, gets
            get = gets[-1]
            assert get.size == size
            rates.append(get.size / get.seconds / MiB)
            print(f"pacing: {size // MiB} MiB, host cap {host_cap // MiB} MiB/s, call rate "
                  f"{(terms.bytes_per_second or 0) // MiB if terms else 0} MiB/s: Glance "
                  f"{get.seconds:.2f} s ({rates[-1]:.2f} MiB/s), compute "
                  f"{compute_seconds:.2f} s")
    return rates


def _judge(rates: list[float]) -> None:
    worst = max(rates, key=lambda r: abs(r - CAP / MiB))
    print(f"pacing: median {statistics.median(rates):.2f} MiB/s, worst {worst:.2f} MiB/s "
          f"(cap {CAP / MiB:.0f} MiB/s)")
    assert abs(worst - CAP / MiB) <= 0.1 * CAP / MiB, rates


@pytest.mark.parametrize("size", [32 * MiB, 64 * MiB], ids=["32MiB", "64MiB"])
def test_the_host_cap_holds_at_glance(stack: Any, tmp_path: pathlib.Path, size: int) -> None:
    _judge(_glance_rates(stack, tmp_path, size, CAP, None))


@pytest.mark.parametrize("size", [32 * MiB, 64 * MiB], ids=["32MiB", "64MiB"])
def test_a_calls_rate_holds_at_glance(stack: Any, tmp_path: pathlib.Path, size: int) -> None:
    _judge(_glance_rates(stack, tmp_path, size, 0, DownloadTerms(bytes_per_second=CAP)))


def test_a_paused_download_resumes_with_a_range_request(stack: Any,
                                                        tmp_path: pathlib.Path) -> None:
    """A call whose end time comes mid-download keeps what it wrote; the next call re-reads
    that through the checks and asks Glance for the rest only."""
    size = 32 * MiB
    cache = _cache(stack, tmp_path / "instances")
    with raw_image(stack, os.urandom(size), "pause") as image:
        image_id = image["id"]
        terms = DownloadTerms(until=time.time() + 2, bytes_per_second=CAP)
        with pytest.raises(DownloadPaused) as paused:
            cache.fetch(CTXT, image_id, terms=terms)
        kept = paused.value.kept
        assert 0 < kept < size
        assert paused.value.bytes_downloaded == kept
        assert os.path.getsize(cache.paused_file(image_id)) == kept
        assert not os.path.exists(cache.path_for(image_id))
        outcome = cache.fetch(CTXT, image_id)
        assert outcome.downloaded and outcome.bytes_resumed == kept
        assert outcome.bytes_downloaded == size - kept
        assert not os.path.exists(cache.paused_file(image_id))
        gets = file_gets(stack, image_id, at_least=2)
        assert len(gets) == 2, gets
        first, second = gets
        assert second.status == 206
        # Glance's log counts the chunks its store yielded: the first GET's are what was
        # kept, what the kernels held when the compute stopped (the paced connection's small
        # buffers) and the rest of the chunk Glance was sending; so at most one chunk beyond
        # the one holding the kept offset. The second GET sent exactly the rest.
        assert second.size == size - kept
        extra = first.size + second.size - size
        print(f"pause: kept {kept / MiB:.2f} MiB, Glance sent {first.size / MiB:.2f} + "
              f"{second.size / MiB:.2f} MiB: {extra / MiB:.2f} MiB more than the image")
        assert extra >= 0
        assert first.size <= most_counted_for_cut(kept), (
            first, second, kept)
