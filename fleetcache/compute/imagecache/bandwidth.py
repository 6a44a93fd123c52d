"""The compute's bandwidth cap on downloads from the image service (``[image_cache]
max_download_bytes_per_second``).

:class:`ThrottledSource` wraps the image source the cache downloads from: every chunk the
source hands to its writer first takes its size in tokens from one :class:`TokenBucket`
shared by all the downloads of the host, and the source's thread sleeps when the bucket is
empty. The source then reads its socket more slowly, so TCP's flow control slows the image
service down as well, and the cap holds for the host as a whole however many downloads run.

The link, not only the compute, must see the cap: the source is asked for its paced variant
(:meth:`~fleetcache.image.source.ImageSource.paced`: for Glance, small reads and a small
socket receive buffer, :mod:`fleetcache.image.glance`), and the bucket saves up only
:func:`paced_burst`, a twentieth of a second's worth, so that neither a saved second nor the
kernel's buffers let the image service run ahead of the cap (docs/performance.md, "Capped
downloads as the image service sees them"). A call's own rate (:mod:`~fleetcache.compute.
imagecache.terms`) is paced the same way, in a bucket of its own.

NOTE: hand-written rather than a library: the candidates (``token-bucket``, ``pyrate-limiter``)
count requests, not bytes, or bring storage back-ends for a dozen lines of arithmetic.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from oslo_config import cfg

from fleetcache.common.context import RequestContext
from fleetcache.image import ImageMeta, ImageSource, ProgressCallback
from fleetcache.image.source import Buffer, Writer


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up; :meth:`take` may go into debt
    and sleeps it off, so a chunk larger than the burst still passes, at the rate."""

    def __init__(self, rate: float, burst: float | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = time.sleep) -> None:
        if rate <= 0:
            raise ValueError("a token bucket needs a positive rate")
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else rate)
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.burst
        self._stamp = clock()
        self._lock = threading.Lock()

    def take(self, amount: int) -> float:
        """Take ``amount`` tokens, sleeping until they are earned. :returns: seconds slept."""
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            self._tokens -= amount
            wait = -self._tokens / self.rate if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)
        return wait


#: The least a bucket may save up: one small read's worth (:func:`paced_burst`).
MIN_BURST = 64 * 1024


def paced_burst(rate: float) -> float:
    """Tokens a bucket of ``rate`` saves up: a twentieth of a second's worth (at least
    :data:`MIN_BURST`). A second's worth let the image service send the first second of a
    capped download at once (docs/performance.md, "Capped downloads as the image service
    sees them")."""
    return max(rate / 20, MIN_BURST)


class _ThrottledWriter:
    def __init__(self, writer: Writer, bucket: TokenBucket) -> None:
        self.writer = writer
        self.bucket = bucket

    def write(self, data: Buffer, /) -> int | None:
        self.bucket.take(len(data))
        return self.writer.write(data)


class ThrottledSource(ImageSource):
    """``source`` (paced at the bucket's rate: :func:`throttled`), its downloads sharing
    ``bucket``; ``show`` is left as it is."""

    def __init__(self, source: ImageSource, bucket: TokenBucket) -> None:
        super().__init__(source.conf)
        self.source = source
        self.bucket = bucket

    def paced(self, rate: int) -> ImageSource:
        """The same cap over ``source`` paced at the stricter of ``rate`` and the cap."""
        return ThrottledSource(self.source.paced(min(rate, int(self.bucket.rate))),
                               self.bucket)

    def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        return self.source.show(ctxt, image_id)

    def download(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                 progress: ProgressCallback | None = None) -> int:
        return self.source.download(ctxt, meta, _ThrottledWriter(writer, self.bucket),
                                    progress)

    def download_from(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                      offset: int, progress: ProgressCallback | None = None) -> int:
        return self.source.download_from(ctxt, meta, _ThrottledWriter(writer, self.bucket),
                                         offset, progress)


def throttled(conf: cfg.ConfigOpts, source: ImageSource) -> ImageSource:
    """``source`` under ``[image_cache] max_download_bytes_per_second`` (0: ``source``)."""
    rate: int = conf.image_cache.max_download_bytes_per_second
    if not rate:
        return source
    return ThrottledSource(source.paced(rate), TokenBucket(rate, paced_burst(rate)))
