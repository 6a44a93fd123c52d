"""One checked download into the image cache directory, and its publication as a cached base.

:func:`download_checked` is the image cache's pipeline (called by
:meth:`~fleetcache.compute.imagecache.cache.ImageCache.fetch` under the image's lock), in one
pass over the bytes:

1. size and multihash, computed while the bytes are written (:mod:`fleetcache.image.verify`);
2. the :class:`DownloadCheck` s (signatures: :mod:`fleetcache.image.signature`), fed the same
   chunks, finished on the complete file;
3. format safety (:mod:`fleetcache.image.format_safety`): the format is detected from the
   same chunks, then the rules and ``qemu-img info`` run on the file;
4. :func:`publish` as the disk backend plan says (a rename, or a ``qemu-img convert``).

The download goes to a unique temporary name in the cache directory; any failure, a refused
image included, removes it, so a refused image never lands in the cache and its reason is the
exception's message. The one exception is a download stopped at its call's end time
(:class:`~fleetcache.compute.imagecache.terms.DownloadPaused`): every byte received is
written, and the file becomes the image's paused download
(:mod:`~fleetcache.compute.imagecache.paused`), never a cached base.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Protocol

from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute import imagebackend
from fleetcache.compute.imagecache.files import unlink
from fleetcache.compute.imagecache.odirect import file_sink
from fleetcache.compute.imagecache.terms import DownloadPaused
from fleetcache.image import ImageMeta, ImageSource, ProgressCallback, download_verified
from fleetcache.image.format_safety import StreamInspection, inspect_image
from fleetcache.image.source import Buffer
from fleetcache.image.verify import HashCpus

LOG = logging.getLogger(__name__)


class DownloadCheck(Protocol):
    """Looks at one download while it streams; may refuse it before it is published."""

    def feed(self, chunk: Buffer) -> None:
        """Every byte once, in order (in the writer thread); raise to abort the download."""

    def finish(self, path: str) -> None:
        """The complete, hash-verified file, before its inspection; raise to refuse it."""

    def before_conversion(self, virtual_size: int) -> None:
        """The inspected file is about to be converted into a base of ``virtual_size`` bytes
        (as ``qemu-img info`` read it from the file, not as the image service declared it);
        raise to refuse it."""


#: Builds the check of one download (None: nothing to check for this image), before the
#: download starts; it may raise to refuse the image at once.
CheckFactory = Callable[[RequestContext, ImageMeta], DownloadCheck | None]


@dataclasses.dataclass(frozen=True)
class Published:
    """What one checked download made: the cached base and the formats it records.

    :ivar bytes_downloaded: bytes fetched from the image source.
    :ivar disk_format: the image's format, as the image source declares it.
    :ivar base_format: the format the base is stored in (``raw`` when it was converted).
    """

    bytes_downloaded: int
    disk_format: str
    base_format: str


def require_disk_format(meta: ImageMeta) -> str:
    """The image's ``disk_format``, for whoever is about to use the image on this host.

    An image without one is one whose data has not been uploaded yet (Glance sets the disk
    format with the data; a ``queued`` image has none), so it is refused as not available:
    nothing is wrong with its bytes (that would be ``ImageFormatRejected``), there are none to
    use yet, and the caller may ask again once the upload is done. The cache's download and
    instance disk creation both apply this rule, before any byte moves.

    :raises ImageNotAvailable: when the image has no disk format.
    """
    if not meta.disk_format:
        raise exception.ImageNotAvailable(image_id=meta.id, reason="it has no disk_format")
    return meta.disk_format


def _prepare(conf: cfg.ConfigOpts, ctxt: RequestContext, meta: ImageMeta,
             factories: Sequence[CheckFactory]
             ) -> tuple[StreamInspection, imagebackend.DiskPlan, list[DownloadCheck]]:
    """Everything decided before the first byte: refuses an image that cannot be inspected,
    signed wrongly or not at all usable here, before it is downloaded (as Nova)."""
    disk_format = require_disk_format(meta)
    inspection = StreamInspection(meta.id, disk_format)
    plan = imagebackend.choose(conf, disk_format)
    checks = [c for make in factories if (c := make(ctxt, meta)) is not None]
    return inspection, plan, checks


def download_checked(conf: cfg.ConfigOpts, source: ImageSource, ctxt: RequestContext,
                     meta: ImageMeta, factories: Sequence[CheckFactory], final: str,
                     tmp_prefix: str, progress: ProgressCallback | None = None,
                     keep: str | None = None, hash_cpus: HashCpus | None = None) -> Published:
    """Download ``meta`` to ``<tmp_prefix>XXXX`` beside ``final``, check it, publish it.

    :param keep: where a download stopped at its call's end time keeps its bytes (its
        file is renamed there, replacing what was there); None: nothing is kept.
    :param hash_cpus: the process's CPUs for hashing (:class:`~fleetcache.image.verify.
        HashCpus`); None: the download's threads run anywhere.
    :returns: the bytes downloaded and the formats of the published base.
    :raises DownloadPaused: the source stopped at the call's end time, with ``kept`` (the
        bytes now in ``keep``) and ``size`` set.
    :raises ImageNotAvailable: the image has no disk format (nothing is downloaded).
    :raises ImageFormatRejected, ImageSignatureVerificationFailed: the image is refused.
    :raises HostOutOfMemory: the download's buffers could not be had.
    :raises ImageStoreFailed: the file could not be written or converted.
    :raises ImageFetchError: the download or its verification failed. In every case the
        temporary file is removed.
    """
    inspection, plan, checks = _prepare(conf, ctxt, meta, factories)
    fd, tmp = tempfile.mkstemp(prefix=tmp_prefix, dir=os.path.dirname(final))
    try:
        with os.fdopen(fd, "wb") as f:
            sink = file_sink(f)
            try:
                written = download_verified(
                    source, ctxt, meta, sink, progress,
                    [*(c.feed for c in checks), inspection.feed], aligned_sink=sink.direct,
                    keep_on=(DownloadPaused,), hash_cpus=hash_cpus)
            except DownloadPaused:
                sink.finish()  # what was received is in the file, for the next call
                raise
            sink.finish()
            os.fsync(f.fileno())
        for check in checks:
            check.finish(tmp)
        inspected = inspect_image(tmp, inspection.disk_format, conf, image_id=meta.id,
                                  stream=inspection)
        if plan.convert:
            for check in checks:
                check.before_conversion(inspected.virtual_size)
        os.chmod(tmp, 0o644)
        publish(plan, meta.id, tmp, final)
    except DownloadPaused as paused:
        _keep(tmp, keep, meta, paused)
        raise
    except OSError as exc:  # the sources map their reads' own (a transfer failure)
        unlink(tmp)
        raise exception.ImageStoreFailed(
            image_id=meta.id, reason=f"cannot write {tmp}: {exc}") from exc
    except MemoryError as exc:  # the pipeline's buffers (ChunkPool.acquire)
        unlink(tmp)
        raise exception.HostOutOfMemory(image_id=meta.id, reason=str(exc)) from exc
    except BaseException:
        unlink(tmp)
        raise
    return Published(written, plan.disk_format, plan.base_format)


def _keep(tmp: str, keep: str | None, meta: ImageMeta, paused: DownloadPaused) -> None:
    """Make the stopped download ``tmp`` the image's paused download ``keep`` (durable; an
    empty one is not kept) and note its size in ``paused``."""
    paused.size = meta.size
    paused.kept = 0
    try:
        kept = os.path.getsize(tmp)
        if keep is not None and kept:
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, keep)
            paused.kept = kept
    except OSError:
        LOG.exception("Image %s: cannot keep the paused download %s", meta.id, tmp)
    finally:
        unlink(tmp)


def publish(plan: imagebackend.DiskPlan, image_id: str, downloaded: str, final: str) -> None:
    """Make the inspected ``downloaded`` file the cached base ``final``, as ``plan`` says: a
    rename, or a conversion (``qemu-img convert``, fsync, rename).

    :raises ImageStoreFailed: when the conversion fails (nothing is left behind).
    """
    try:
        imagebackend.prepare_base(plan, downloaded, final)
    except exception.QemuImgError as exc:
        raise exception.ImageStoreFailed(
            image_id=image_id, reason=f"cannot convert it from {plan.source_format} to "
            f"{plan.base_format} for the {plan.backend} backend: {exc}") from exc
