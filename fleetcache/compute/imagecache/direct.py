"""Direct downloads from Ceph: whether an image can take them, and the byte stream itself.

:class:`RbdDirect` decides per image (:meth:`RbdDirect.route`): an ``rbd://`` location that
parses strictly (:mod:`fleetcache.image.rbd_location`) and names this compute's cluster (the
fsid of ``[glance] rbd_ceph_conf``) is exported from Ceph; a malformed URL or another cluster
is a *fallback* (downloaded over HTTP, the reason recorded); an image without one is plain
HTTP.

:class:`RbdExportSource` is an image source whose ``download`` is the privileged export
(:func:`fleetcache.privsep.rbd.export_to_fifo`): the compute makes a FIFO in ``_base``,
opens it for reading, and the privsep daemon's ``rbd export`` writes the image into it. The
compute reads the FIFO in the download's thread, so the bytes go through the very pipeline
of an HTTP download (size and multihash while written, signature and format checks, fsync,
rename: :func:`~fleetcache.compute.imagecache.download.download_checked`), in one pass, with
the export, the hashing and the disk write overlapping. Exporting to a file and reading it
back would hash after the export instead of during it.

The compute asks for the image (pool, image and snapshot of its location) and names its FIFO,
nothing more: as which Ceph user, with which keyring, ``ceph.conf`` and timeouts, and in which
``_base`` the FIFO must be, the daemon reads from its own configuration (the compute's files,
on the helper's command line), through the same
:class:`~fleetcache.common.rbd_settings.RbdSettings` this side routes with.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import logging
import os
import secrets
import select
import threading
from collections.abc import Callable

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.common.rbd_settings import RbdSettings
from fleetcache.image import ImageMeta, ImageSource, ProgressCallback
from fleetcache.image.chunks import receive_buffer
from fleetcache.image.rbd_location import (
    InvalidRbdUrl,
    RbdLocation,
    parse_rbd_url,
    rbd_urls,
    read_fsid,
)
from fleetcache.image.source import Writer
from fleetcache.privsep import rbd as privsep_rbd

LOG = logging.getLogger(__name__)

#: Bytes read from the FIFO per chunk handed to the verifying writer.
CHUNK = 4 * 1024 * 1024
#: Pipe buffer asked for (Linux's default ``pipe-max-size``): fewer wake-ups than 64 KiB.
PIPE_SIZE = 1024 * 1024
#: Seconds between two looks at the export while waiting for its first byte.
POLL_SECONDS = 0.2

#: The privileged export: ``(pool, image, snapshot, fifo)``, as
#: :func:`fleetcache.privsep.rbd.export_to_fifo` (which takes the Ceph user, keyring, conf,
#: timeouts and base directory from the privsep daemon's own configuration, not from here).
ExportFunc = Callable[[str, str, str, str], object]


@dataclasses.dataclass(frozen=True)
class Route:
    """How one image is fetched: ``location`` set: from Ceph; else over HTTP, with
    ``fallback`` saying why the direct path was refused (None: it never applied)."""

    location: RbdLocation | None = None
    fallback: str | None = None


class RbdDirect:
    """The direct path of one compute (``[glance] allowed_direct_url_schemes = rbd``).

    :param settings: this compute's; only ``ceph_conf`` is used here (its fsid routes an
        image): the export takes the rest from the privsep daemon's configuration.
    :param export: the privileged export (a stand-in in tests).
    """

    def __init__(self, settings: RbdSettings,
                 export: ExportFunc = privsep_rbd.export_to_fifo) -> None:
        self.settings = settings
        self.export = export
        #: The CPUs of the thread that built it, the service's at start-up: those of every
        #: export's thread (:class:`_ExportThread`), whatever thread a download runs in.
        self.cpus = frozenset(os.sched_getaffinity(0))

    def route(self, meta: ImageMeta) -> Route:
        """Where ``meta``'s bytes come from. Never raises: a problem is a fallback."""
        urls = list(rbd_urls(meta))
        if not urls:
            return Route()
        try:
            local = read_fsid(self.settings.ceph_conf)
        except (OSError, ValueError) as exc:
            return Route(fallback=f"cannot read the local cluster's fsid: {exc}")
        reasons = []
        for url in urls:
            try:
                location = parse_rbd_url(url)
            except InvalidRbdUrl as exc:
                reasons.append(f"malformed rbd URL {url!r}: {exc}")
                continue
            if location.fsid != local:
                reasons.append(f"fsid mismatch: {location.url} is in cluster {location.fsid}, "
                               f"this compute's ({self.settings.ceph_conf}) is {local}")
                continue
            return Route(location=location)
        return Route(fallback="; ".join(reasons))

    def source(self, location: RbdLocation, base_dir: str, tmp_prefix: str) -> RbdExportSource:
        return RbdExportSource(self, location, base_dir, tmp_prefix)


class RbdExportSource(ImageSource):
    """The bytes of one image, exported from Ceph through the privsep daemon into a FIFO."""

    def __init__(self, direct: RbdDirect, location: RbdLocation, base_dir: str,
                 tmp_prefix: str) -> None:
        self.direct = direct
        self.location = location
        self.base_dir = base_dir
        self.tmp_prefix = tmp_prefix

    def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        raise NotImplementedError("an export source only streams bytes")

    def download(self, ctxt: RequestContext, meta: ImageMeta, writer: Writer,
                 progress: ProgressCallback | None = None) -> int:
        """Export ``meta`` into ``writer``; :raises ImageFetchError: naming the failure."""
        fifo = os.path.join(self.base_dir, f"{self.tmp_prefix}rbd{secrets.token_hex(4)}")
        # The FIFO's own errors are this path's (HTTP is tried next), as its reads' are; only
        # the writer's are the host's.
        try:
            os.mkfifo(fifo, 0o600)
            try:
                rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except BaseException:
                os.unlink(fifo)
                raise
        except OSError as exc:
            raise exception.ImageFetchError(
                image_id=meta.id, reason=f"cannot make the export's FIFO: {exc}") from exc
        export = _ExportThread(self, fifo)
        try:
            export.start()
            written = self._read(meta, rfd, export, writer, progress)
        finally:
            os.close(rfd)  # an export still writing gets EPIPE and stops
            export.join()
            os.unlink(fifo)
        if export.error is not None:
            raise exception.ImageFetchError(image_id=meta.id, reason=export.error)
        return written

    def _read(self, meta: ImageMeta, rfd: int, export: _ExportThread, writer: Writer,
              progress: ProgressCallback | None) -> int:
        # A FIFO opened before any writer polls as neither readable nor hung up until a
        # writer came (Linux), so this waits for the export's first byte or its end.
        poller = select.poll()
        poller.register(rfd, select.POLLIN)
        while not poller.poll(POLL_SECONDS * 1000):
            if not export.is_alive():
                break
        fcntl.fcntl(rfd, fcntl.F_SETFL, fcntl.fcntl(rfd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        try:
            fcntl.fcntl(rfd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
        except OSError as exc:  # a smaller pipe-max-size: keep the default
            if exc.errno not in (errno.EPERM, errno.EINVAL):
                raise exception.ImageFetchError(
                    image_id=meta.id, reason=f"cannot size the export's FIFO: {exc}") from exc
        written = 0
        while True:
            # The writer's page-aligned buffer, handed over as it is (no copy into ``bytes``;
            # the cache's sink writes a full one with O_DIRECT): its threads still read the
            # previous ones, which it reuses once they are done.
            view = receive_buffer(writer, CHUNK)
            filled = 0
            while filled < CHUNK:
                try:
                    n = os.readv(rfd, [view[filled:]])
                except BlockingIOError:  # no writer ever came: the export failed early
                    n = 0
                except OSError as exc:
                    raise exception.ImageFetchError(
                        image_id=meta.id, reason=f"reading the export failed: {exc}") from exc
                if n == 0:
                    break
                filled += n
            if filled:
                writer.write(view if filled == CHUNK else view[:filled])
                written += filled
                if progress is not None:
                    progress(written)
            if filled < CHUNK:
                return written


class _ExportThread(threading.Thread):
    """Runs the privileged export (a blocking call into the privsep daemon)."""

    def __init__(self, src: RbdExportSource, fifo: str) -> None:
        super().__init__(name="rbd-export", daemon=True)
        self.src = src
        self.fifo = fifo
        self.error: str | None = None

    def run(self) -> None:
        # Started by a verified download's receiving thread, it has that thread's CPUs (kept
        # off the hash's: fleetcache.image.verify.beside_the_hash). The privsep daemon and
        # its channel's reader thread, which the first export (or the first after the daemon
        # died) starts from here, would keep them for the life of the compute, and so would
        # every ``rbd export`` after: they get the service's instead.
        with contextlib.suppress(OSError):  # the cgroup's CPU set changed meanwhile
            os.sched_setaffinity(0, self.src.direct.cpus)
        loc = self.src.location
        try:
            self.src.direct.export(loc.pool, loc.image, loc.snapshot, self.fifo)
        except Exception as exc:
            self.error = str(exc) or type(exc).__name__
