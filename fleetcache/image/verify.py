"""Verification of image bytes in one pass, while they are written.

:class:`ImageVerifier` counts and hashes the bytes against the image's metadata: Glance's
multihash (``os_hash_algo``/``os_hash_value``) when set, else the MD5 ``checksum`` (so MD5 is
computed only for an image without a multihash), and the ``size``. :class:`VerifyingWriter`
is the writer a source streams into: it hashes each chunk on one worker thread and writes it
to the destination file on another, so that the hash, the disk write and the network read
overlap (hashlib and file writes release the GIL on large buffers). It also lends sources
page-aligned receive buffers (:mod:`fleetcache.image.chunks`), taken back once both workers
are done with a chunk.
:func:`download_verified` puts the two together. The file is never read back.

The hash is a download's bound (one core, sequential), so a verified download given its
process's :class:`HashCpus` splits the CPUs it may use: the hash thread keeps to one of its own
(the highest free), the receiving thread (while it receives) and the writer thread to the
others. Without it the hash thread was runnable but not running for 7-34 % of its hashing at
load 2 (the receiving thread, woken by it once per chunk, among those that took its CPU); with
the others kept off its CPU, a download with sha512 took 1.37-1.76 s per 512 MiB against
2.28-3.09 s in the same run. Left free to run anywhere, the hash thread still followed the
receiving thread's wake-ups onto the busy CPU: kept to its own as well, and with the body read
straight into the pool's buffers (:mod:`~fleetcache.image.http_into`), a 1 GiB sha512 download
from Glance went from 0.77-0.81 of one core's hash (median of 10 rounds each, alternated in one
process: receiving into buffers but the hash free; kept, but bytes copied) to 0.91-0.92
(docs/performance.md, "Download from Glance").
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import mmap
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.image.chunks import ChunkPool
from fleetcache.image.lanes import PIPELINE_BYTES, Lane, confine
from fleetcache.image.source import Buffer, ImageMeta, ImageSource, ProgressCallback, Writer

LOG = logging.getLogger(__name__)

#: Hash algorithms strong enough to take an image's bytes from a party that may shape them
#: (a peer of a pre-cache job): Glance's multihash, never MD5.
STRONG_HASHES = frozenset({"sha256", "sha384", "sha512", "sha3_224", "sha3_256", "sha3_384",
                           "sha3_512"})


def has_strong_hash(os_hash_algo: object, os_hash_value: object) -> bool:
    """Whether the image service's multihash of an image (its ``os_hash_algo`` and
    ``os_hash_value``) is one of :data:`STRONG_HASHES`: only such bytes may come from peers."""
    return os_hash_algo in STRONG_HASHES and bool(os_hash_value)


def expected_hash(meta: ImageMeta) -> tuple[str, str] | None:
    """``(algorithm, hex digest)`` the image's bytes must hash to, or None if it has none.

    :raises ImageFetchError: the image names a hash algorithm this host lacks and has no MD5
        checksum to fall back to.
    """
    algo, value = meta.os_hash_algo, meta.os_hash_value
    if algo and value:
        if algo in hashlib.algorithms_available:
            return algo, value.lower()
        if not meta.checksum:
            raise exception.ImageFetchError(
                image_id=meta.id, reason=f"os_hash_algo {algo!r} is not available on this host"
            )
        LOG.warning("Image %s: os_hash_algo %r unavailable, verifying the MD5 checksum",
                    meta.id, algo)
    if meta.checksum:
        return "md5", meta.checksum.lower()
    return None


class CpuSplit(NamedTuple):
    """Where a verified download's threads run: the hash thread on ``hash``, the receiving
    and writer threads on ``others``."""

    hash: frozenset[int]
    others: frozenset[int]


class HashCpus:
    """The CPUs the verified downloads of one process hash on, one download per CPU.

    A download takes, for its hash thread, the highest CPU the process may use that no other
    download's hash holds, and keeps its other threads off the CPUs so held
    (:meth:`lease`). When fewer than two are free (or the process may use fewer than two),
    it confines nothing: its threads run where the kernel puts them. So concurrent downloads
    hash on CPUs of their own instead of on one. One per process, built at start-up (the
    image cache's) and passed in.

    A host that pins instances' vCPUs keeps its services off their CPUs (systemd's
    ``CPUAffinity=``): the hashes then keep to the CPUs the compute service may use.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[int] = set()

    @contextlib.contextmanager
    def lease(self) -> Iterator[CpuSplit | None]:
        """A split for one download, for the block; None: nothing is confined."""
        split = self._take()
        try:
            yield split
        finally:
            if split is not None:
                with self._lock:
                    self._held -= split.hash

    def _take(self) -> CpuSplit | None:
        try:
            allowed = frozenset(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return None
        with self._lock:
            free = allowed - self._held
            if len(free) < 2:
                return None
            mine = max(free)
            self._held.add(mine)
            others = free - {mine}
        return CpuSplit(hash=frozenset({mine}), others=others)


@contextlib.contextmanager
def beside_the_hash(cpus: frozenset[int] | None) -> Iterator[None]:
    """The calling thread on ``cpus`` for the block (nothing when None), then back on the CPUs
    it had before, whatever the block raised."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    confined = confine(cpus)
    try:
        yield
    finally:
        if confined:
            confine(before)


class ImageVerifier:
    """Counts and hashes an image's bytes; :meth:`verify` compares them with the metadata."""

    def __init__(self, meta: ImageMeta) -> None:
        self.meta = meta
        self.size = 0
        expected = expected_hash(meta)
        self.algorithm: str | None = None
        self._expected: str | None = None
        self._hash: Any = None
        if expected is not None:
            self.algorithm, self._expected = expected
            self._hash = hashlib.new(self.algorithm, usedforsecurity=False)

    def update(self, data: Buffer) -> None:
        self.size += len(data)
        if self._hash is not None:
            self._hash.update(data)

    def hexdigest(self) -> str | None:
        return self._hash.hexdigest() if self._hash is not None else None

    def verify(self) -> None:
        """Check the bytes seen so far against the image's size and hash.

        :raises ImageChecksumMismatch: naming what differs, got and expected.
        """
        meta = self.meta
        if meta.size is not None and self.size != meta.size:
            raise exception.ImageChecksumMismatch(
                image_id=meta.id,
                reason=f"size mismatch: got {self.size} bytes, expected {meta.size}",
            )
        digest = self.hexdigest()
        if digest is not None and digest != self._expected:
            raise exception.ImageChecksumMismatch(
                image_id=meta.id,
                reason=f"{self.algorithm} mismatch: got {digest}, expected {self._expected}",
            )
        if digest is None:
            LOG.warning("Image %s has no checksum or multihash; only its size was checked",
                        meta.id)


class VerifyingWriter:
    """Hashes each chunk and writes it to ``sink``, on two worker threads.

    One thread (``image-hash``) feeds the verifier's hash; the other (``image-writer``) shows
    the chunk to the ``observers`` (format inspection, signature check, the disk floor), then
    writes it; each queue is bounded in bytes (:mod:`~fleetcache.image.lanes`). So
    the hash of one chunk, the write of another and the reader's next receive run at once:
    hashlib and file writes release the GIL on large buffers. One thread doing both hashed
    and wrote one after the other; with two, the hash alone, on one core, is the bound of a
    download, not hash + write (docs/performance.md, "Hash speed per core").

    ``write`` hands the chunk to both and returns; an error of either worker (a full disk, a
    refused format) is raised by the next ``write`` or by :meth:`close`. Chunks must not be
    changed after ``write`` (both threads read them; each queue holds at most ``limit``
    bytes).
    A chunk received into a buffer of :meth:`receive_buffer` goes back to the pool when both
    workers are done with it; the source must not touch it after ``write``.

    ``aligned_sink``: ``sink`` writes a page-aligned chunk of whole pages as it is and copies
    anything else into an aligned buffer first (``O_DIRECT``). Then ``write`` itself copies a
    chunk of whole pages that is not a pool buffer (``bytes`` from HTTP) into one, so that
    the copy is made by the caller, which mostly waits for the workers, not in the writer
    thread, whose copies and writes otherwise bound the download (``bench/download.py``
    with the hash left out; docs/performance.md, "The writer thread's copy").

    Given ``cpus`` (a :meth:`HashCpus.lease`), the hash thread keeps to ``cpus.hash`` and the
    writer thread to ``cpus.others``, and so should the caller's thread while it receives
    (:func:`beside_the_hash`, as :func:`download_verified` does): the hash thread then has a
    CPU that none of the download's other threads takes from it, and does not follow their
    wake-ups onto theirs.
    """

    def __init__(self, sink: Writer, verifier: ImageVerifier,
                 observers: Sequence[Callable[[Buffer], None]] = (),
                 limit: int = PIPELINE_BYTES, aligned_sink: bool = False,
                 cpus: CpuSplit | None = None) -> None:
        self.sink = sink
        self.verifier = verifier
        self.observers = tuple(observers)
        self.aligned_sink = aligned_sink
        #: Where the download's threads run (None: anywhere).
        self.cpus = cpus
        self._pool = ChunkPool()
        self._lanes = (
            Lane("image-hash", [verifier.update], self._pool.seen,
                 cpus=self.cpus.hash if self.cpus else None, limit=limit),
            Lane("image-writer", [*self.observers, sink.write], self._pool.seen,
                 cpus=self.cpus.others if self.cpus else None, limit=limit),
        )
        try:
            for lane in self._lanes:
                lane.start()
        except BaseException:  # e.g. no thread to be had: the one started must not wait on
            self.abort()
            raise

    def receive_buffer(self, size: int) -> memoryview:
        """A page-aligned buffer of ``size`` bytes for the source's next chunk (a view of it
        is then passed to :meth:`write`); reused once both workers are done with it."""
        return self._pool.acquire(size)

    def write(self, data: Buffer, /) -> int:
        self._raise_first_error()
        if data:
            if self.aligned_sink and not len(data) % mmap.PAGESIZE:
                data = self._pool.copy_in(data)
            self._pool.handed(data, len(self._lanes))
            for lane in self._lanes:
                lane.queue.put(data)
        return len(data)

    def close(self) -> None:
        """Wait until every chunk is hashed and written.

        :raises: the first worker error, if there was one.
        """
        self._stop()
        self._raise_first_error()

    def abort(self) -> None:
        """Stop the workers without raising (the download failed anyway)."""
        for lane in self._lanes:
            lane.cancelled = True
        self._stop()

    def _stop(self) -> None:
        for lane in self._lanes:
            if lane.is_alive():
                lane.queue.put(None)
        for lane in self._lanes:
            if lane.ident is not None:  # started
                lane.join()

    def _raise_first_error(self) -> None:
        for lane in self._lanes:
            if lane.error is not None:
                raise lane.error


def download_verified(
    source: ImageSource,
    ctxt: RequestContext,
    meta: ImageMeta,
    sink: Writer,
    progress: ProgressCallback | None = None,
    observers: Sequence[Callable[[Buffer], None]] = (),
    aligned_sink: bool = False,
    keep_on: tuple[type[BaseException], ...] = (),
    hash_cpus: HashCpus | None = None,
) -> int:
    """Stream image ``meta`` from ``source`` into ``sink``, verifying it in the same pass.

    Each ``observer`` (e.g. a format inspector's ``feed``) sees every byte once, in order, in
    the writer thread; an error it raises aborts the download. The calling thread receives
    beside the hash thread (:func:`beside_the_hash`), back on its own CPUs on return.
    ``sink`` is not flushed or synced: that is the caller's (it knows what the file is for).
    ``aligned_sink``: as for :class:`VerifyingWriter`. ``keep_on``: errors of the source (a
    download stopped on purpose) after which every chunk it handed over is still written to
    ``sink`` before the error is raised on, so the caller may keep a prefix of the image with
    nothing missing. ``hash_cpus``: the process's, when the image has a hash (None: nothing
    is confined).

    :returns: bytes written.
    :raises ImageFetchError: on a size or hash mismatch, or when the transfer failed.
    :raises OSError: when writing ``sink`` failed.
    """
    verifier = ImageVerifier(meta)
    lease = (hash_cpus.lease() if hash_cpus is not None and verifier.algorithm is not None
             else contextlib.nullcontext())
    with lease as cpus:
        writer = VerifyingWriter(sink, verifier, observers, aligned_sink=aligned_sink,
                                 cpus=cpus)
        try:
            with beside_the_hash(cpus.others if cpus else None):
                source.download(ctxt, meta, writer, progress)
        except keep_on:
            writer.close()
            raise
        except BaseException:
            writer.abort()
            raise
        writer.close()
    verifier.verify()
    return verifier.size
