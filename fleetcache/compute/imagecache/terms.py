"""A ``cache_images`` call's terms for its downloads: an end time and a rate (RPC 1.5), and
who names the source after refused peer bytes (1.6) or failed peers (1.7).

:class:`DownloadTerms` is what the conductor asks of one call: ``until`` (epoch seconds), the
time at which a download still in flight stops, keeping what it wrote as a paused download
(:mod:`~fleetcache.compute.imagecache.paused`), and ``bytes_per_second``, the pace of this
call's downloads, on top of the host's own cap (:mod:`~fleetcache.compute.imagecache.
bandwidth`): each chunk takes its tokens from both buckets, so the stricter one wins.

:meth:`DownloadTerms.bind` gives one download its :class:`TermsSource`, the source it reads
from with the terms applied to every chunk its writer is handed: the chunk is paced, written,
and then, once ``until`` has passed, :class:`DownloadPaused` is raised out of the source. A
chunk read from the network is therefore always written (nothing received is downloaded
twice), and a download stops within one chunk's time of ``until`` (a pacing sleep never runs
past it).

Use::

    terms = DownloadTerms(until=time.time() + 600, bytes_per_second=8 << 20)
    source = terms.bind(source)   # per download: its own bucket
    source.download(ctxt, meta, writer)   # raises DownloadPaused at ``until``
"""

from __future__ import annotations

import dataclasses
import time

from fleetcache.common.context import RequestContext
from fleetcache.compute.imagecache.bandwidth import TokenBucket, paced_burst
from fleetcache.image import ImageMeta, ImageSource, ProgressCallback
from fleetcache.image.source import Buffer, Writer

MiB = 1024 * 1024


class DownloadPaused(Exception):
    """A download stopped at its call's end time (not an error: the call ran out of time).

    :ivar image_id: the image.
    :ivar kept: bytes of it kept on disk for the next call (0: none).
    :ivar size: the image's size as the image service declares it (None: unknown).
    :ivar bytes_downloaded: bytes this call fetched of it.
    :ivar bytes_resumed: bytes this call took from a paused download of an earlier call.
    :ivar absent_peers: the peers asked before the pause that answered they do not hold
        the image, so that the job's run does not offer them for it again.
    """

    def __init__(self, image_id: str, kept: int = 0, size: int | None = None,
                 bytes_downloaded: int = 0, bytes_resumed: int = 0,
                 absent_peers: tuple[str, ...] = ()) -> None:
        self.image_id = image_id
        self.kept = kept
        self.size = size
        self.bytes_downloaded = bytes_downloaded
        self.bytes_resumed = bytes_resumed
        self.absent_peers = absent_peers
        super().__init__(image_id)

    def __str__(self) -> str:
        return self.reason

    @property
    def reason(self) -> str:
        """``paused at the call's end time: 12.0 of 32.0 MiB kept``."""
        of = f" of {self.size / MiB:.1f}" if self.size is not None else ""
        return f"paused at the call's end time: {self.kept / MiB:.1f}{of} MiB kept"


@dataclasses.dataclass(frozen=True)
class DownloadTerms:
    """One call's terms (all optional: ``DownloadTerms()`` changes nothing).

    :ivar until: epoch seconds at which downloads in flight stop; None: no end.
    :ivar bytes_per_second: the pace of each of this call's downloads; None: the host's cap
        only.
    :ivar origin_after_refused_peers: whether a download whose peer bytes a check refused is
        fetched again from the origin in the same call (1.4), or left to the conductor
        (False, RPC 1.6: :class:`~fleetcache.compute.imagecache.download_paths.
        PeerBytesRefused`), which gives one host of the group the origin and the others a
        peer: every host behind a lying peer in a cut-through chain relayed its bytes, and
        each fetching the image again from the origin at once would cost a copy per host.
    :ivar origin_after_failed_peers: whether a download whose peers all failed in transport
        (dead, stalled, gone) goes on from the origin in the same call (1.4), or stops there,
        its bytes kept as the image's paused download for a next call from the origin
        (False, RPC 1.7:
        :class:`~fleetcache.compute.imagecache.download_paths.PeersGone`): the conductor
        then names the next source, the image service under a download lease and one of the
        group's image service slots, so that a fault does not let hosts around the caps.
    """

    until: float | None = None
    bytes_per_second: int | None = None
    origin_after_refused_peers: bool = True
    origin_after_failed_peers: bool = True

    def expired(self, now: float | None = None) -> bool:
        """Whether ``until`` has passed."""
        return self.until is not None and (time.time() if now is None else now) >= self.until

    def bind(self, source: ImageSource) -> ImageSource:
        """``source`` under these terms for one download (``source`` itself without any)."""
        if self.until is None and not self.bytes_per_second:
            return source
        return TermsSource(source, self)


class _TermsWriter:
    """Paces each chunk (a bucket of its own), writes it, then stops the download once the
    end time passed."""

    def __init__(self, writer: Writer, terms: DownloadTerms, image_id: str) -> None:
        self.writer = writer
        self.terms = terms
        self.image_id = image_id
        rate = terms.bytes_per_second
        self.bucket = (TokenBucket(rate, paced_burst(rate), sleep=self._sleep) if rate
                       else None)

    def write(self, data: Buffer, /) -> int | None:
        if self.bucket is not None:
            self.bucket.take(len(data))
        n = self.writer.write(data)
        if self.terms.expired():
            raise DownloadPaused(self.image_id)
        return n

    def _sleep(self, seconds: float) -> None:
        """The bucket's sleep, cut at the end time (the write after it then pauses)."""
        until = self.terms.until
        if until is not None:
            seconds = min(seconds, max(until - time.time(), 0.0))
        time.sleep(seconds)


class TermsSource(ImageSource):
    """``source`` under one call's :class:`DownloadTerms` (see the module docstring); each
    download through it has a bucket of its own."""

    def __init__(self, source: ImageSource, terms: DownloadTerms) -> None:
        super().__init__(source.conf)
        rate = terms.bytes_per_second
        self.source = source.paced(rate) if rate else source
        self.terms = terms

    def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        return self.source.show(ctxt, image_id)

    def download(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                 progress: ProgressCallback | None = None) -> int:
        self._refuse_if_expired(meta)
        return self.source.download(ctxt, meta, self._writer(writer, meta), progress)

    def download_from(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                      offset: int, progress: ProgressCallback | None = None) -> int:
        self._refuse_if_expired(meta)
        return self.source.download_from(ctxt, meta, self._writer(writer, meta), offset,
                                         progress)

    def paced(self, rate: int) -> ImageSource:
        return TermsSource(self.source.paced(rate), self.terms)

    def _refuse_if_expired(self, meta: ImageMeta) -> None:
        if self.terms.expired():
            raise DownloadPaused(meta.id)

    def _writer(self, writer: Writer, meta: ImageMeta) -> _TermsWriter:
        return _TermsWriter(writer, self.terms, meta.id)
