"""Paused downloads: what a call stopped at its end time kept of an image, and the next
download's resumption from it.

A download stopped by its call's end time (:class:`~fleetcache.compute.imagecache.terms.
DownloadPaused`) keeps every byte it wrote in ``.<sha1>.paused`` beside the cache's temporary
files (:func:`~fleetcache.compute.imagecache.layout.paused_name`): hidden, so it is never
listed, reported, indexed or served to peers, and without the mark of a download under way, so
that start-up keeps it. Nothing of it is trusted: :class:`ResumedSource` streams its bytes
into the next download's checked pipeline (size, multihash, signature, format inspection,
the disk floor: :func:`~fleetcache.compute.imagecache.download.download_checked`) as if
they came from the network, then asks the origin for the rest from there
(:meth:`~fleetcache.image.source.ImageSource.download_from`: Glance's ``Range``), so the one
hash covers the whole image and no byte kept is downloaded twice. Bytes the checks refuse
make the caller drop the file and fetch the image again from byte 0 in the same call.

A paused download is dropped when it no longer fits its image (larger than the image's
size, the image gone from the image service), when the image is fetched by a path that
cannot resume (peers, Ceph's direct path: they start from byte 0), and by the ageing pass
once it is older than ``[image_cache] partial_keep_seconds``
(:meth:`~fleetcache.compute.imagecache.cache.ImageCache.remove_old_paused`).
"""

from __future__ import annotations

import contextlib
import os
from typing import BinaryIO

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.image import ImageMeta, ImageSource, ProgressCallback
from fleetcache.image.source import Writer

#: Bytes read from a paused download's file per chunk.
READ_CHUNK = 4 * 1024 * 1024


def kept_bytes(path: str) -> int:
    """Bytes a paused download holds (0: there is none)."""
    try:
        return os.stat(path, follow_symlinks=False).st_size
    except FileNotFoundError:
        return 0


class NotResumable(exception.ImageFetchError):
    """The paused download cannot be read, or the origin cannot continue an image mid-way;
    the caller starts again from byte 0."""


class ResumedSource(ImageSource):
    """The bytes of paused download ``path``, then ``origin``'s from there on.

    :ivar resumed: bytes taken from the file so far.
    """

    def __init__(self, path: str, origin: ImageSource) -> None:
        super().__init__(origin.conf)
        self.path = path
        self.origin = origin
        self.resumed = 0

    def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        return self.origin.show(ctxt, image_id)

    def download(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                 progress: ProgressCallback | None = None) -> int:
        """:raises NotResumable: the paused file cannot be read, or the origin cannot start
        mid-image (the file's bytes may be written already: the caller's download is spoilt
        and must start again)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise NotResumable(image_id=meta.id, reason=f"cannot open {self.path}: {exc}") from exc
        with os.fdopen(fd, "rb") as f:
            with contextlib.suppress(AttributeError, OSError):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            while chunk := self._read(f, meta):
                writer.write(chunk)
                self.resumed += len(chunk)
                if progress is not None:
                    progress(self.resumed)
        try:
            got = self.origin.download_from(ctxt, meta, writer, self.resumed, progress)
        except NotImplementedError as exc:
            raise NotResumable(image_id=meta.id,
                               reason="its source cannot resume a download") from exc
        return self.resumed + got

    def _read(self, f: BinaryIO, meta: ImageMeta) -> bytes:
        """The paused file's next bytes; its read errors are the resume's (not the writer's).

        :raises NotResumable: the read failed."""
        try:
            return f.read(READ_CHUNK)
        except OSError as exc:
            raise NotResumable(image_id=meta.id, reason=f"cannot read {self.path}: {exc}") from exc
