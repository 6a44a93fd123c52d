"""Downloads under way on this compute, for cut-through (``[image_cache] peer_cut_through``):
:class:`InFlight`, and :class:`GrowingFile`, the image server's view of one download's file.

The image cache registers each download it runs (:meth:`InFlight.downloading`, around its
fill, under the image's lock): the image, the size the image service gave, and where its
temporary file is (the cache directory and the download's partial prefix; the file is found
there, a regular file, never a path from a request). ``serve_images`` registers an image
this host is about to download for a job (:meth:`InFlight.expect`). The image server then
streams such a file while it grows (:class:`GrowingFile`): the bytes below its size on disk
are written (each write is a ``write(2)`` that returned; nothing is preallocated), so
everything up to there is sent, then it waits for more, up to the image's size.

Whoever reads these bytes verifies the whole image against the image service's record when it
ends, as for any peer: a download that later fails its own verification has only fed bytes
that the receiver's check rejects too. A download that fails or is abandoned (its file gone
before the image's size was reached) ends every stream of it short, and one that makes no
progress for ``stall_timeout`` seconds ends them too; the receiver then resumes from its
next source with ``Range``.

::

    with cache.in_flight.downloading(meta.id, meta.size, cache.base_dir, prefix):
        ...download into <base_dir>/<prefix>XXXX, publish it...
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from oslo_config import cfg

#: States of a download: announced by ``serve_images``, under way, published, failed.
EXPECTED, RUNNING, DONE, FAILED = "expected", "running", "done", "failed"
#: Seconds between two looks at a growing file's size (state changes wake at once).
POLL = 0.01


@dataclasses.dataclass(frozen=True)
class Download:
    """One download of an image on this host, as last registered.

    :ivar size: bytes, as the image service gave them; None: unknown (never streamed).
    :ivar generation: increases with every registration (a new download is another file).
    """

    image_id: str
    state: str
    generation: int
    size: int | None = None
    directory: str = ""
    prefix: str = ""
    #: Monotonic seconds of its registration.
    since: float = dataclasses.field(default_factory=time.monotonic)
    #: Announced again because its peers failed: the image was given back to the
    #: conductor, whose next call for it may first wait for a download slot.
    handed_back: bool = False

    def partial_path(self) -> str | None:
        """The download's temporary file: the newest regular file of ``directory`` named
        ``prefix`` + a ``mkstemp`` suffix (links and FIFOs skipped), or None while there is
        none.

        A name with a further dot is made from the download, not the download: the
        conversion a backend asks for, written beside it as ``<download>.converted``
        (:func:`~fleetcache.compute.imagebackend.disks.prepare_base`) while the download is
        still registered as running. It is the newest file then, and not the image's bytes.
        """
        if self.state != RUNNING or not self.prefix:
            return None
        best: tuple[float, int, str] | None = None
        with contextlib.suppress(FileNotFoundError), os.scandir(self.directory) as it:
            for entry in it:
                if not entry.name.startswith(self.prefix) or "." in entry.name[len(self.prefix):]:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode):
                        key = (st.st_mtime, st.st_size, entry.path)
                        best = key if best is None or key > best else best
        return best[2] if best is not None else None


class InFlight:
    """The downloads of this compute's image cache, by image id (thread-safe).

    Only the last download of each image is kept (a few dozen bytes each).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._downloads: dict[str, Download] = {}
        self._generation = 0

    def get(self, image_id: str) -> Download | None:
        with self._cond:
            return self._downloads.get(image_id)

    def expect(self, image_id: str) -> None:
        """``image_id`` is about to be downloaded here (a job made this host its source);
        a download under way stays as it is, and one handed back stays handed back (another
        job's announcement does not shorten its receivers' wait)."""
        with self._cond:
            current = self._downloads.get(image_id)
            if current is None or current.state != RUNNING:
                handed_back = current is not None and current.handed_back  # EXPECTED only
                self._set(Download(image_id, EXPECTED, self._next(), handed_back=handed_back))

    @contextlib.contextmanager
    def downloading(self, image_id: str, size: int | None, directory: str, prefix: str,
                    again: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
        """Register the download of ``image_id`` into ``directory/<prefix>...`` while the
        block runs: ``done`` when it returns, ``failed`` when it raises, and announced as
        coming again (``expected``, a new generation: the streams of this one end, new
        requests are asked to wait) when it raises one of ``again``, without a moment in
        between that would tell a receiver this host has nothing."""
        with self._cond:
            generation = self._next()
            self._set(Download(image_id, RUNNING, generation, size, directory, prefix))
        state = FAILED
        try:
            yield
            state = DONE
        except again:
            state = EXPECTED
            raise
        finally:
            with self._cond:
                current = self._downloads.get(image_id)
                if current is not None and current.generation == generation:
                    self._set(Download(image_id, EXPECTED, self._next(), handed_back=True)
                              if state == EXPECTED
                              else dataclasses.replace(current, state=state))

    def wait(self, timeout: float) -> None:
        """Until any download changes state, at most ``timeout`` seconds."""
        with self._cond:
            self._cond.wait(timeout)

    def _next(self) -> int:
        self._generation += 1
        return self._generation

    def _set(self, download: Download) -> None:
        self._downloads[download.image_id] = download
        self._cond.notify_all()


class DownloadEnded(Exception):
    """A growing file will not reach the image's size: failed, abandoned or stalled."""


class GrowingFile:
    """The open temporary file ``fd`` of ``download``, as it grows.

    :param stall_timeout: seconds without growth before :meth:`wait_beyond` gives up.
    :param stopping: set when the image server stops: the waits end at their next look.
    :param clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, fd: int, download: Download, in_flight: InFlight, stall_timeout: float,
                 stopping: threading.Event | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fd = fd
        self.download = download
        self.in_flight = in_flight
        self.stall_timeout = stall_timeout
        self.stopping = stopping
        self._clock = clock
        assert download.size is not None
        self.size: int = download.size

    def holds_beyond(self, offset: int, wait: float = 0.0) -> bool:
        """Whether more than ``offset`` bytes are written, waiting up to ``wait`` seconds for
        them while the download runs."""
        deadline = self._clock() + wait
        while True:
            if os.fstat(self.fd).st_size > offset:
                return True
            current = self.in_flight.get(self.download.image_id)
            if (current is None or current.generation != self.download.generation
                    or current.state != RUNNING or self._clock() >= deadline
                    or self._stopping()):
                return False
            self.in_flight.wait(POLL)

    def wait_beyond(self, offset: int) -> int:
        """The bytes written so far, once there are more than ``offset`` (at most the
        image's size).

        :raises DownloadEnded: the download failed, its file was removed or it made no
            progress for ``stall_timeout`` seconds before passing ``offset``.
        """
        deadline = self._clock() + self.stall_timeout
        while True:
            st = os.fstat(self.fd)
            written = min(st.st_size, self.size)
            if written > offset:
                return written
            current = self.in_flight.get(self.download.image_id)
            if current is None or current.generation != self.download.generation:
                raise DownloadEnded("replaced by another download")
            if current.state == FAILED:
                raise DownloadEnded("the download failed")
            if st.st_nlink == 0 or current.state == DONE:
                raise DownloadEnded(f"the file ended at byte {written} of {self.size}")
            if self._clock() >= deadline:
                raise DownloadEnded(f"no progress for {self.stall_timeout:.0f} s at byte "
                                    f"{written}")
            if self._stopping():
                raise DownloadEnded("the image server stops")
            self.in_flight.wait(POLL)

    def _stopping(self) -> bool:
        return self.stopping is not None and self.stopping.is_set()


class _Cache(Protocol):
    """What :func:`expect_download` needs of the image cache (``ImageCache``)."""

    @property
    def in_flight(self) -> InFlight: ...

    def path_for(self, image_id: str) -> str: ...


def expect_download(conf: cfg.ConfigOpts, cache: _Cache, image_id: str) -> bool:
    """Whether this host serves ``image_id`` from its coming download (``serve_images`` of a
    conductor doing cut-through): ``[image_cache] peer_cut_through`` is on and the image has
    no base here at all (a converted or unindexed base is never served); it is then
    registered as expected."""
    if not conf.image_cache.peer_cut_through or os.path.lexists(cache.path_for(image_id)):
        return False
    cache.in_flight.expect(image_id)
    return True
