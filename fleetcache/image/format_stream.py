"""Streaming format detection: an ``InspectWrapper`` fed the chunks a download writes.

:class:`StreamInspection` is the first half of :mod:`fleetcache.image.format_safety`: it
decides which single format the bytes are (refusing polyglots) while they are written, so the
file never has to be read again for it; ``format_safety.inspect_image`` then applies the rules.
"""

from __future__ import annotations

from oslo_utils.imageutils import format_inspector as fi

from fleetcache.common import exception
from fleetcache.common.disk_formats import INSPECTABLE_FORMATS
from fleetcache.image.source import Buffer

_READ_CHUNK = 64 * 1024


def reject(image_id: str | None, reason: str) -> exception.ImageFormatRejected:
    return exception.ImageFormatRejected(image_id=image_id or "(unknown)", reason=reason)


def check_declared_format(image_id: str | None, disk_format: str) -> None:
    """Refuse, before any byte is read, a ``disk_format`` that cannot be inspected."""
    if disk_format not in INSPECTABLE_FORMATS:
        raise reject(
            image_id,
            f"disk_format {disk_format!r} cannot be inspected safely "
            f"(inspectable formats: {', '.join(INSPECTABLE_FORMATS)})",
        )


class _ChunkFeed:
    """A pretend file whose ``read`` returns the chunk the downloader just wrote."""

    def __init__(self) -> None:
        self.pending = b""

    def read(self, size: int = -1) -> bytes:
        chunk, self.pending = self.pending, b""
        return chunk


class StreamInspection:
    """Format detection fed chunk by chunk while the image is written (an ``InspectWrapper``).

    :raises ImageFormatRejected: from the constructor for an uninspectable ``disk_format``, and
        from :meth:`feed` as soon as the content cannot be ``disk_format``.
    """

    def __init__(self, image_id: str | None, disk_format: str, abort_early: bool = True) -> None:
        check_declared_format(image_id, disk_format)
        self.image_id = image_id
        self.disk_format = disk_format
        self.bytes_seen = 0
        self._feed = _ChunkFeed()
        expected = disk_format if abort_early and disk_format in fi.ALL_FORMATS else None
        self._wrapper = fi.InspectWrapper(self._feed, expected_format=expected)  # type: ignore[arg-type]
        self._decided = False
        self._finished = False

    @property
    def decided(self) -> bool:
        """True once no further bytes can change the verdict (the rest need not be fed)."""
        return self._decided

    def feed(self, chunk: Buffer) -> None:
        """Show the inspector the next chunk of the image, in file order (any bytes-like
        chunk: the inspectors get ``bytes``, copied only until the format is decided)."""
        if self._finished:
            raise RuntimeError("StreamInspection.feed() after finish()")
        if self._decided or not chunk:
            return
        self.bytes_seen += len(chunk)
        self._feed.pending = chunk if isinstance(chunk, bytes) else bytes(chunk)
        try:
            self._wrapper.read(len(chunk))
        except Exception as exc:  # the expected format's inspector failed on this data
            raise reject(
                self.image_id, f"content does not match disk_format {self.disk_format}: {exc}"
            ) from exc
        self._decided = self._wrapper.formats is not None

    def finish(self) -> fi.FileInspector:
        """Mark the end of the stream and return the single detected format's inspector.

        :raises ImageFormatRejected: for a polyglot (several formats at once, other than
            iso + gpt).
        """
        if not self._finished:
            self._finished = True
            self._wrapper.close()
        try:
            detected = self._wrapper.format
        except fi.ImageFormatError as exc:
            names = sorted(str(i) for i in self._wrapper.formats or [])
            if names == ["gpt", "iso"]:
                return self._iso_with_gpt()
            raise reject(
                self.image_id,
                f"content matches several formats at once ({', '.join(names)}): "
                "a polyglot image is refused",
            ) from exc
        if detected is None:  # pragma: no cover - cannot happen after close()
            raise reject(self.image_id, "format could not be determined")
        return detected

    def _iso_with_gpt(self) -> fi.FileInspector:
        """A bootable ISO may carry an MBR/GPT in front: Nova treats it as iso.

        Unlike Nova, the MBR part must pass its own safety check too, so a polyglot cannot
        hide a malformed partition table behind the ISO's null check.
        """
        found = {str(i): i for i in self._wrapper.formats or []}
        try:
            found["gpt"].safety_check()
        except (fi.SafetyCheckFailed, fi.ImageFormatError) as exc:
            detail = "; ".join(f"{k}: {v}" for k, v in getattr(exc, "failures", {}).items())
            raise reject(
                self.image_id,
                f"iso+gpt polyglot whose MBR/GPT part fails the safety check ({detail or exc})",
            ) from exc
        return found["iso"]


def detect_from_file(path: str, image_id: str | None, disk_format: str) -> fi.FileInspector:
    inspection = StreamInspection(image_id, disk_format, abort_early=False)
    with open(path, "rb") as f:
        while not inspection.decided:
            chunk = f.read(_READ_CHUNK)
            if not chunk:
                break
            inspection.feed(chunk)
    return inspection.finish()

