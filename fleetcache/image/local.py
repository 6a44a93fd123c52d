"""The local directory image source, for the embedded demo, labs and tests.

Layout of ``[image_source] local_directory``: ``<image_id>`` holds the image's bytes and
``<image_id>.json`` its metadata, in the same shape as a Glance v2 image body (custom
properties top-level). :func:`add_image` puts an image there, computing its size, MD5
``checksum`` and sha512 multihash the way Glance does.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any, BinaryIO

from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.image.source import ImageMeta, ImageSource, ProgressCallback, Writer

_IMAGE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
_COPY_CHUNK = 4 * 1024 * 1024


def _paths(directory: str, image_id: str) -> tuple[str, str]:
    """``(data file, metadata file)`` of ``image_id``; refuses ids that are not plain names.

    :raises ImageNotFound: for an id that could escape ``directory`` (no such image there).
    """
    if not _IMAGE_ID.match(image_id) or image_id.endswith(".json"):
        raise exception.ImageNotFound(image_id=image_id)
    data = os.path.join(directory, image_id)
    return data, data + ".json"


class LocalImageSource(ImageSource):
    """Images from a directory of ``<id>`` + ``<id>.json`` pairs."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        super().__init__(conf)
        self.directory: str = conf.image_source.local_directory
        self.chunk_size: int = conf.glance.download_chunk_size

    def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        return self.check_active(self._read_meta(image_id))

    def download_from(
        self,
        ctxt: RequestContext,
        meta: ImageMeta,
        writer: Writer,
        offset: int,
        progress: ProgressCallback | None = None,
    ) -> int:
        image_id = meta.id
        data_path, _ = _paths(self.directory, image_id)
        written = offset
        try:
            src = open(data_path, "rb")
        except FileNotFoundError as exc:
            raise exception.ImageNotAvailable(image_id=image_id, reason="no data") from exc
        except OSError as exc:  # the source's failure, not the writer's
            raise exception.ImageFetchError(image_id=image_id,
                                            reason=f"cannot open {data_path}: {exc}") from exc
        with src:
            if offset:  # a FIFO (the tests' slow image) cannot seek, and need not from 0
                try:
                    src.seek(offset)
                except OSError as exc:
                    raise exception.ImageFetchError(
                        image_id=image_id, reason=f"cannot seek to byte {offset}: {exc}") from exc
            while chunk := _read(src, image_id, self.chunk_size):
                writer.write(chunk)
                written += len(chunk)
                if progress is not None:
                    progress(written)
        return written - offset

    def _read_meta(self, image_id: str) -> ImageMeta:
        _, meta_path = _paths(self.directory, image_id)
        try:
            with open(meta_path, encoding="utf-8") as f:
                body = json.load(f)
        except FileNotFoundError as exc:
            raise exception.ImageNotFound(image_id=image_id) from exc
        except (OSError, ValueError) as exc:
            raise exception.ImageFetchError(
                image_id=image_id, reason=f"unreadable metadata {meta_path}: {exc}") from exc
        return ImageMeta.from_dict({**body, "id": image_id})


def _read(src: BinaryIO, image_id: str, size: int) -> bytes:
    try:
        return src.read(size)
    except OSError as exc:
        raise exception.ImageFetchError(image_id=image_id, reason=f"read failed: {exc}") from exc


def add_image(
    directory: str,
    data: BinaryIO | str,
    *,
    image_id: str | None = None,
    name: str | None = None,
    disk_format: str = "raw",
    container_format: str = "bare",
    status: str = "active",
    properties: dict[str, Any] | None = None,
) -> ImageMeta:
    """Copy ``data`` (a path or a binary file object) into ``directory`` as a new image.

    Size, ``checksum`` (MD5) and ``os_hash_value`` (sha512) are computed in the same pass as
    the copy. Both files appear atomically (written aside, then renamed).

    :returns: the new image's metadata.
    """
    image_id = image_id or str(uuid.uuid4())
    data_path, meta_path = _paths(directory, image_id)
    os.makedirs(directory, exist_ok=True)
    md5, sha512, size = hashlib.md5(usedforsecurity=False), hashlib.sha512(), 0
    with _atomic_file(data_path, "wb") as dst, _open(data) as src:
        while chunk := src.read(_COPY_CHUNK):
            md5.update(chunk)
            sha512.update(chunk)
            dst.write(chunk)
            size += len(chunk)
    meta = ImageMeta(
        id=image_id, name=name if name is not None else image_id, status=status,
        disk_format=disk_format, container_format=container_format, size=size,
        checksum=md5.hexdigest(), os_hash_algo="sha512", os_hash_value=sha512.hexdigest(),
        properties=dict(properties or {}),
    )
    with _atomic_file(meta_path, "w") as f:
        json.dump(meta.to_dict(), f, indent=2, sort_keys=True)
    return meta


def _open(data: BinaryIO | str) -> contextlib.AbstractContextManager[BinaryIO]:
    if isinstance(data, str):
        return open(data, "rb")
    return contextlib.nullcontext(data)  # the caller's file object stays open


@contextlib.contextmanager
def _atomic_file(path: str, mode: str) -> Iterator[Any]:
    """``open(path, mode)`` that writes aside and renames into place on success."""
    fd, tmp = tempfile.mkstemp(prefix=".add-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
