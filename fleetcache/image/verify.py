"""Verification of image bytes in one pass, while they are written.

:class:`ImageVerifier` counts and hashes the bytes against the image's metadata: Glance's
multihash (``os_hash_algo``/``os_hash_value``) when set, else the MD5 ``checksum``, and the
``size``. :class:`VerifyingWriter` is the writer a source streams into: it hashes each chunk
and writes it to the destination file, in a worker thread so that hashing and the disk write
run beside the network read (hashlib and file writes release the GIL on large buffers).
:func:`download_verified` puts the two together. The file is never read back.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.image.source import ImageMeta, ImageSource, ProgressCallback, Writer

LOG = logging.getLogger(__name__)

#: Chunks queued between the reader and the hashing/writing thread (bounds memory use).
PIPELINE_DEPTH = 4


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

    def update(self, data: bytes) -> None:
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
    """Hashes each chunk and writes it to ``sink``, in a worker thread.

    ``write`` hands the chunk over and returns; an error of the worker (a full disk) is raised
    by the next ``write`` or by :meth:`close`. Chunks must not be changed after ``write``.
    """

    def __init__(self, sink: Writer, verifier: ImageVerifier,
                 observers: Sequence[Callable[[bytes], None]] = (),
                 depth: int = PIPELINE_DEPTH) -> None:
        self.sink = sink
        self.verifier = verifier
        self.observers = tuple(observers)
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="image-writer", daemon=True)
        self._thread.start()

    def write(self, data: bytes, /) -> int:
        if self._error is not None:
            raise self._error
        if data:
            self._queue.put(data if isinstance(data, bytes) else bytes(data))
        return len(data)

    def close(self) -> None:
        """Wait until every chunk is hashed and written.

        :raises: the worker's error, if it had one.
        """
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if self._error is not None:
            raise self._error

    def abort(self) -> None:
        """Stop the worker without raising (the download failed anyway)."""
        if self._error is None:
            self._error = exception.ImageFetchError(
                image_id=self.verifier.meta.id, reason="download aborted")
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _run(self) -> None:
        while (chunk := self._queue.get()) is not None:
            if self._error is not None:
                continue  # drain, so that the reader never blocks on a full queue
            try:
                self.verifier.update(chunk)
                for observe in self.observers:
                    observe(chunk)
                self.sink.write(chunk)
            except BaseException as exc:  # handed to the reader thread
                self._error = exc


def download_verified(
    source: ImageSource,
    ctxt: RequestContext,
    meta: ImageMeta,
    sink: Writer,
    progress: ProgressCallback | None = None,
    observers: Sequence[Callable[[bytes], None]] = (),
) -> int:
    """Stream image ``meta`` from ``source`` into ``sink``, verifying it in the same pass.

    Each ``observer`` (e.g. a format inspector's ``feed``) sees every byte once, in order, in
    the writer thread; an error it raises aborts the download. ``sink`` is not flushed or
    synced: that is the caller's (it knows what the file is for).

    :returns: bytes written.
    :raises ImageFetchError: on a size or hash mismatch, or when the transfer failed.
    :raises OSError: when writing ``sink`` failed.
    """
    writer = VerifyingWriter(sink, ImageVerifier(meta), observers)
    try:
        source.download(ctxt, meta, writer, progress)
    except BaseException:
        writer.abort()
        raise
    writer.close()
    writer.verifier.verify()
    return writer.verifier.size
