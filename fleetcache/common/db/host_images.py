"""Queries of the compute image cache reports (tables ``host_images`` and ``host_image_caches``).

Each compute reports its whole cache (every image with its size, last use and pin, plus the
disk bytes the cache takes) after each ageing pass and each pre-cache request; the conductor stores
it here, replacing that host's previous set in one transaction. A report older than the one
stored (casts may arrive out of order) is ignored. The scheduler's cached-image weigher reads
it (:func:`hosts_with_image`); the API reads it back: the cache of one
host (:func:`host_cache_get`, ``GET /os-hosts/{host}/image-cache``) and the usage of every
host (:func:`host_cache_list`, the status page).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from typing import NotRequired, TypedDict

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from fleetcache.common import exception
from fleetcache.common.db import models
from fleetcache.common.db.session import Database

#: Attempts at storing one report when a concurrent report of the same host races it.
_ATTEMPTS = 3


class ReportedImage(TypedDict):
    """One image as a compute reports it: bytes, and last use in epoch seconds (UTC)."""

    image_id: str
    size: int
    last_used: float
    #: Until when a pre-cache request pinned it (epoch seconds; conductor RPC 1.5); absent:
    #: not pinned.
    pinned_until: NotRequired[float]


def from_epoch(seconds: float) -> datetime.datetime:
    """Epoch seconds as the naive UTC datetime the database stores."""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).replace(tzinfo=None)


def _checked(images: Sequence[ReportedImage]) -> dict[str, ReportedImage]:
    """The report's images by id.

    :raises InvalidInput: naming the first malformed entry.
    """
    by_id: dict[str, ReportedImage] = {}
    for image in images:
        ok = (isinstance(image, dict) and isinstance(image.get("image_id"), str)
              and 0 < len(image["image_id"]) <= 255
              and isinstance(image.get("size"), int) and image["size"] >= 0
              and isinstance(image.get("last_used"), int | float)
              and isinstance(image.get("pinned_until"), int | float | None))
        if not ok:
            raise exception.InvalidInput(reason=f"malformed cached image entry {image!r}")
        by_id[image["image_id"]] = image
    return by_id


def set_host_images(
    db: Database,
    host: str,
    images: Sequence[ReportedImage],
    usage_bytes: int,
    reported_at: float | None = None,
) -> bool:
    """Replace ``host``'s cached images with ``images``.

    :param reported_at: when the compute built the report (epoch seconds); default now.
    :returns: False when a newer report of ``host`` is already stored (nothing changed).
    :raises InvalidInput: for a malformed entry or a negative ``usage_bytes``.
    """
    if not host or not isinstance(usage_bytes, int) or usage_bytes < 0:
        raise exception.InvalidInput(reason="a cache report needs a host and usage_bytes >= 0")
    by_id = _checked(images)
    reported = from_epoch(reported_at) if reported_at is not None else models.utcnow()
    for attempt in range(_ATTEMPTS):
        try:
            with db.transaction() as session:
                return _replace(session, host, by_id, usage_bytes, reported)
        except (IntegrityError, OperationalError):
            # NOTE: two first reports of one host both insert its summary row (one loses on
            # the unique host), or MariaDB picks a deadlock victim; the retry finds the row
            # and queues behind its lock.
            if attempt == _ATTEMPTS - 1:
                raise
    return False  # pragma: no cover - the loop returns or raises


def _replace(session: Session, host: str, images: dict[str, ReportedImage],
             usage_bytes: int, reported: datetime.datetime) -> bool:
    if session.get_bind().dialect.name == "sqlite":
        # NOTE: SQLite ignores FOR UPDATE and pysqlite begins the transaction only at the
        # first write, so two reports could both pass the age check below and the older
        # one land last. A no-op UPDATE takes SQLite's write lock first.
        session.execute(update(models.HostImageCache).where(models.HostImageCache.host == host)
                        .values(usage_bytes=models.HostImageCache.usage_bytes))
    summary = session.scalars(
        select(models.HostImageCache).where(models.HostImageCache.host == host)
        .with_for_update()).first()
    if summary is not None and summary.reported_at > reported:
        return False
    now = models.utcnow()
    if summary is None:
        summary = models.HostImageCache(host=host)
        session.add(summary)
    summary.usage_bytes = usage_bytes
    summary.image_count = len(images)
    summary.reported_at = reported
    summary.updated_at = now
    session.flush()
    session.execute(delete(models.HostImage).where(models.HostImage.host == host))
    session.add_all(
        models.HostImage(host=host, image_id=i["image_id"], size=i["size"],
                         last_used=from_epoch(i["last_used"]), pinned_until=_pin(i),
                         updated_at=now)
        for i in images.values()
    )
    return True


def _pin(image: ReportedImage) -> datetime.datetime | None:
    until = image.get("pinned_until")
    return None if until is None else from_epoch(until)


def hosts_with_image(db: Database, image_id: str, hosts: Iterable[str] | None = None) -> set[str]:
    """The hosts (of ``hosts``, default all) whose latest report holds ``image_id``: one
    query."""
    query = select(models.HostImage.host).where(models.HostImage.image_id == image_id)
    if hosts is not None:
        query = query.where(models.HostImage.host.in_(list(hosts)))
    with db.transaction() as session:
        return set(session.scalars(query))


class HostCacheDict(TypedDict):
    """A compute's image cache as a whole, as it last reported it (naive UTC times)."""

    host: str
    usage_bytes: int
    image_count: int
    reported_at: datetime.datetime


class HostImageDict(TypedDict):
    """One image of a compute's image cache, as it last reported it."""

    image_id: str
    size: int
    last_used: datetime.datetime
    #: Until when the image is pinned on the host, as it reported; None: not pinned.
    pinned_until: datetime.datetime | None


def _cache_dict(row: models.HostImageCache) -> HostCacheDict:
    return HostCacheDict(host=row.host, usage_bytes=row.usage_bytes,
                         image_count=row.image_count, reported_at=row.reported_at)


def host_cache_list(db: Database) -> list[HostCacheDict]:
    """Every reporting host's cache summary, by host name (one query, no image rows)."""
    with db.transaction() as session:
        rows = session.scalars(select(models.HostImageCache).order_by(models.HostImageCache.host))
        return [_cache_dict(r) for r in rows]


def host_cache_get(db: Database, host: str) -> tuple[HostCacheDict | None, list[HostImageDict]]:
    """``host``'s cache summary (``None``: it never reported) and its images, most recently
    used first."""
    with db.transaction() as session:
        summary = session.scalars(
            select(models.HostImageCache).where(models.HostImageCache.host == host)).first()
        images = session.scalars(
            select(models.HostImage).where(models.HostImage.host == host)
            .order_by(models.HostImage.last_used.desc(), models.HostImage.image_id))
        return (_cache_dict(summary) if summary is not None else None,
                [HostImageDict(image_id=i.image_id, size=i.size, last_used=i.last_used,
                               pinned_until=i.pinned_until)
                 for i in images])
