"""Unit tests of a call's terms for its downloads (fleetcache.compute.imagecache.terms): the
per-call rate beside the host's cap, and the stop at the end time."""

from __future__ import annotations

import io
import os
import pathlib
import time

import pytest

from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache.bandwidth import (
    ThrottledSource,
    TokenBucket,
    paced_burst,
    throttled,
)
from fleetcache.compute.imagecache.terms import DownloadPaused, DownloadTerms, TermsSource
from fleetcache.image.local import LocalImageSource, add_image
from fleetcache.image.source import ImageMeta
from tests.unit.image.fixtures import make_conf

CTXT = RequestContext()
KiB, MiB = 1024, 1024 * 1024
CHUNK = 16 * KiB


@pytest.fixture
def source(tmp_path: pathlib.Path) -> LocalImageSource:
    conf = make_conf(image_source__local_directory=str(tmp_path / "images"),
                     glance__download_chunk_size=CHUNK)
    return LocalImageSource(conf)


def _image(source: LocalImageSource, size: int) -> ImageMeta:
    return add_image(source.conf.image_source.local_directory, io.BytesIO(os.urandom(size)))


def _timed(source: object, meta: ImageMeta) -> tuple[float, int]:
    out = io.BytesIO()
    started = time.monotonic()
    source.download(CTXT, meta, out)  # type: ignore[attr-defined]
    return time.monotonic() - started, len(out.getvalue())


def test_no_terms_leave_the_source_as_it_is(source: LocalImageSource) -> None:
    assert DownloadTerms().bind(source) is source
    assert isinstance(DownloadTerms(until=time.time() + 60).bind(source), TermsSource)


def test_a_calls_rate_paces_its_download(source: LocalImageSource) -> None:
    meta, rate = _image(source, 512 * KiB), 2 * MiB
    seconds, got = _timed(DownloadTerms(bytes_per_second=rate).bind(source), meta)
    assert got == 512 * KiB
    assert seconds >= (512 * KiB - paced_burst(rate)) / rate * 0.9


@pytest.mark.parametrize(("host_rate", "call_rate"), [(8 * MiB, 2 * MiB), (2 * MiB, 8 * MiB)])
def test_the_stricter_of_the_host_cap_and_the_calls_rate_wins(
        source: LocalImageSource, host_rate: int, call_rate: int) -> None:
    meta = _image(source, 512 * KiB)
    host = ThrottledSource(source, TokenBucket(host_rate, paced_burst(host_rate)))
    seconds, _ = _timed(DownloadTerms(bytes_per_second=call_rate).bind(host), meta)
    strict = min(host_rate, call_rate)
    assert (512 * KiB - paced_burst(strict)) / strict * 0.9 <= seconds < 512 * KiB / strict * 2


def test_each_download_of_a_call_has_a_bucket_of_its_own(source: LocalImageSource) -> None:
    meta, rate = _image(source, 256 * KiB), 1 * MiB
    bound = DownloadTerms(bytes_per_second=rate).bind(source)
    first, _ = _timed(bound, meta)
    second, _ = _timed(bound, meta)  # no debt carried over from the first
    assert abs(second - first) < 0.1


def test_the_end_time_stops_after_writing_the_chunk_in_hand(source: LocalImageSource) -> None:
    meta = _image(source, 1 * MiB)
    out = io.BytesIO()
    terms = DownloadTerms(until=time.time() + 0.2, bytes_per_second=1 * MiB)
    started = time.monotonic()
    with pytest.raises(DownloadPaused):
        terms.bind(source).download(CTXT, meta, out)
    assert 0.15 < time.monotonic() - started < 0.5
    kept = len(out.getvalue())
    assert 0 < kept < 1 * MiB and kept % CHUNK == 0  # whole chunks: none read and dropped


def test_a_pacing_sleep_never_runs_past_the_end_time(source: LocalImageSource) -> None:
    meta = _image(source, 256 * KiB)
    terms = DownloadTerms(until=time.time() + 0.2, bytes_per_second=1024)  # 16 s a chunk
    started = time.monotonic()
    with pytest.raises(DownloadPaused):
        terms.bind(source).download(CTXT, meta, io.BytesIO())
    assert time.monotonic() - started < 0.5


def test_a_download_after_the_end_time_does_not_start(source: LocalImageSource) -> None:
    meta = _image(source, 64 * KiB)
    out = io.BytesIO()
    with pytest.raises(DownloadPaused):
        DownloadTerms(until=time.time() - 1).bind(source).download(CTXT, meta, out)
    assert out.getvalue() == b""


def test_the_reason_says_what_was_kept() -> None:
    paused = DownloadPaused("img", kept=12 * MiB, size=32 * MiB)
    assert str(paused) == "paused at the call's end time: 12.0 of 32.0 MiB kept"
    assert DownloadPaused("img").reason == "paused at the call's end time: 0.0 MiB kept"


class PacedSource(LocalImageSource):
    """Notes the rate its paced variant was asked for."""

    def __init__(self, *args: object, rate: int = 0, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.rate = rate

    def paced(self, rate: int) -> PacedSource:
        return PacedSource(self.conf, rate=rate)


@pytest.mark.parametrize(("host_rate", "call_rate"), [(8 * MiB, 2 * MiB), (2 * MiB, 8 * MiB)])
def test_the_source_is_paced_for_the_stricter_rate(source: LocalImageSource, host_rate: int,
                                                   call_rate: int) -> None:
    source.conf.set_override("max_download_bytes_per_second", host_rate, group="image_cache")
    host = throttled(source.conf, PacedSource(source.conf))
    assert isinstance(host, ThrottledSource) and host.source.rate == host_rate  # type: ignore[attr-defined]
    bound = DownloadTerms(bytes_per_second=call_rate).bind(host)
    assert isinstance(bound, TermsSource) and isinstance(bound.source, ThrottledSource)
    assert bound.source.source.rate == min(host_rate, call_rate)  # type: ignore[attr-defined]
