"""The image cache reports the conductor stored, read straight from their tables.

The conductor writes ``host_images`` and ``host_image_caches``
(:func:`fleetcache.common.db.host_images.set_host_images`); nothing in fleetcache reads them
yet (the scheduler's cached-image weigher will). Tests read the rows here with SQLAlchemy
rather than keep a query in fleetcache that only they use.
"""

from __future__ import annotations

import datetime
from typing import TypedDict

from sqlalchemy import select

from fleetcache.common.db import models
from fleetcache.common.db.session import Database


class StoredImage(TypedDict):
    image_id: str
    size: int
    last_used: datetime.datetime


class StoredReport(TypedDict):
    usage_bytes: int
    image_count: int
    reported_at: datetime.datetime
    #: By image id.
    images: list[StoredImage]


def stored_report(db: Database, host: str) -> StoredReport | None:
    """``host``'s stored report, ``None`` when it has none."""
    with db.transaction() as session:
        summary = session.scalars(
            select(models.HostImageCache).where(models.HostImageCache.host == host)).first()
        if summary is None:
            return None
        rows = session.scalars(select(models.HostImage).where(models.HostImage.host == host)
                               .order_by(models.HostImage.image_id)).all()
        return StoredReport(
            usage_bytes=summary.usage_bytes, image_count=summary.image_count,
            reported_at=summary.reported_at,
            images=[StoredImage(image_id=r.image_id, size=r.size, last_used=r.last_used)
                    for r in rows])


def hosts_with_image(db: Database, image_id: str) -> list[str]:
    """The hosts whose stored report holds ``image_id``, by name."""
    with db.transaction() as session:
        return list(session.scalars(
            select(models.HostImage.host).where(models.HostImage.image_id == image_id)
            .order_by(models.HostImage.host)).all())


def stored_image_ids(db: Database, host: str) -> list[str]:
    """The image ids of ``host``'s stored report (none when it has no report)."""
    report = stored_report(db, host)
    return [i["image_id"] for i in report["images"]] if report else []
