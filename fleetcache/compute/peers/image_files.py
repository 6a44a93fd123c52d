"""The file a peer request reads: an image's cached base or, with cut-through, the temporary
file of its download under way.

Both are found through the image cache (its index, :mod:`~.inflight`), never from a path of
the request, and opened once, with ``O_NOFOLLOW``, then ``fstat``-ed: the server reads only
from the descriptor returned, so a link or a file swapped in after the check is never
served. A base converted for a backend is not the image's own bytes and is not servable
(:meth:`~fleetcache.compute.imagecache.cache.ImageCache.servable`), nor is the conversion
while it is written (:meth:`~.inflight.Download.partial_path`); the download it is made
from holds the image's bytes and is streamed until it ends.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import time
from typing import TYPE_CHECKING

from fleetcache.compute.peers.inflight import DONE, FAILED, RUNNING, GrowingFile

if TYPE_CHECKING:
    from fleetcache.compute.imagecache.cache import ImageCache

LOG = logging.getLogger(__name__)


class DownloadNotStarted(Exception):
    """The download of an image is expected or starting, and has written no file yet."""


def open_image(cache: ImageCache, image_id: str, *, cut_through: bool, answer_by: float,
               send_timeout: float, resume_timeout: float,
               stopping: threading.Event | None = None
               ) -> tuple[int | None, GrowingFile | None]:
    """A read-only descriptor of the cached base of ``image_id`` if it may be served, else
    (with ``cut_through``) of the file of its download under way, waiting until
    ``answer_by`` (monotonic seconds) at most for an expected download to start.

    :returns: ``(fd, None)`` for the base, ``(fd, growing)`` for a download (``growing``
        gives up after ``send_timeout`` seconds without progress), ``(None, None)``:
        neither, a download of unknown size (never streamed), or an expected download that
        did not start within ``send_timeout`` of being announced (``resume_timeout`` of
        being handed back: the conductor's next call for it may first wait for a download
        slot, and the receivers streaming from it would otherwise give it up as dead while
        it waits).
    :raises DownloadNotStarted: its download is expected or starting, still (at
        ``answer_by``, or once ``stopping`` is set: the image server stops).
    """
    in_flight = cache.in_flight
    while True:
        fd = open_regular(cache.servable(image_id))
        download = in_flight.get(image_id)
        if fd is not None or download is None or not cut_through:
            return fd, None
        if download.state == RUNNING:
            if download.size is None:
                return None, None
            fd = open_regular(download.partial_path())
            if fd is not None:
                return fd, GrowingFile(fd, download, in_flight, send_timeout, stopping)
        elif download.state in (DONE, FAILED):  # a converted base is not served
            return open_regular(cache.servable(image_id)), None
        elif time.monotonic() - download.since >= (resume_timeout if download.handed_back
                                                   else send_timeout):
            return None, None  # announced, never started
        if time.monotonic() >= answer_by or (stopping is not None and stopping.is_set()):
            raise DownloadNotStarted(image_id)
        in_flight.wait(min(0.05, max(0.0, answer_by - time.monotonic())))


def open_regular(path: str | None) -> int | None:
    """A read-only descriptor of ``path`` if it is a regular file reached without following
    a link, else None."""
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ELOOP, errno.EACCES, errno.ENXIO):
            LOG.warning("Cannot open cached base %s: %s", path, exc)
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd
