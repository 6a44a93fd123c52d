"""Unit tests of the compute's bandwidth cap (fleetcache.compute.imagecache.bandwidth)."""

from __future__ import annotations

import hashlib
import io
import os
import pathlib
import threading
import time

import pytest

from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache.bandwidth import ThrottledSource, TokenBucket, throttled
from fleetcache.image.local import LocalImageSource, add_image
from tests.unit.common.clock import SleepingClock
from tests.unit.image.fixtures import make_conf

CTXT = RequestContext()


def test_bucket_lets_a_burst_pass_then_holds_the_rate() -> None:
    clock = SleepingClock()
    bucket = TokenBucket(1000, clock=lambda: clock.now, sleep=clock.sleep)
    assert bucket.take(1000) == 0  # the first second's worth, at once
    assert bucket.take(500) == pytest.approx(0.5)
    assert bucket.take(2000) == pytest.approx(2.0)  # larger than the burst: at the rate
    clock.now += 10  # idle: tokens saved up, but no more than one burst
    assert bucket.take(1000) == 0 and bucket.take(1) == pytest.approx(0.001)


def test_bucket_refuses_a_rate_of_zero() -> None:
    with pytest.raises(ValueError, match="positive rate"):
        TokenBucket(0)


def test_throttled_source_holds_two_downloads_to_the_rate_together(
        tmp_path: pathlib.Path) -> None:
    images = tmp_path / "images"
    rate = 4 << 20
    conf = make_conf(image_source__local_directory=str(images),
                     image_cache__max_download_bytes_per_second=rate)
    source = throttled(conf, LocalImageSource(conf))
    assert isinstance(source, ThrottledSource)
    metas = [add_image(str(images), io.BytesIO(os.urandom(4 << 20))) for _ in range(2)]
    sinks = [io.BytesIO(), io.BytesIO()]
    began = time.monotonic()
    threads = [threading.Thread(target=source.download, args=(CTXT, m, s))
               for m, s in zip(metas, sinks, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    # 8 MiB at 4 MiB/s with a 4 MiB burst: about one second, and never the free speed.
    assert elapsed >= 0.9, elapsed
    assert [hashlib.sha512(s.getvalue()).hexdigest() for s in sinks] == [
        m.os_hash_value for m in metas]  # every byte, in order


def test_no_cap_leaves_the_source_as_it_is() -> None:
    conf = make_conf()
    source = LocalImageSource(conf)
    assert throttled(conf, source) is source


def test_a_resumed_download_is_throttled_too(tmp_path: pathlib.Path) -> None:
    conf = make_conf(image_source__local_directory=str(tmp_path))
    meta = add_image(str(tmp_path), io.BytesIO(b"x" * 1000))
    clock = SleepingClock()
    bucket = TokenBucket(100, burst=0, clock=lambda: clock.now, sleep=clock.sleep)
    out = io.BytesIO()
    source = ThrottledSource(LocalImageSource(conf), bucket)
    assert source.download_from(CTXT, meta, out, 400) == 600
    assert out.getvalue() == b"x" * 600
    assert clock.slept == [6.0]  # the 600 bytes written, at 100 bytes/s
