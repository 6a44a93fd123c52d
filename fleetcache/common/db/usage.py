"""What a project uses, read from the ``instances`` table for its quota.

Nova counts a project's servers, cores and RAM in its cell databases the same way
(``InstanceList.get_counts``): every instance that is not deleted, whatever its state, so
that a server still building or in ERROR counts until it is deleted.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from fleetcache.common import instance_states
from fleetcache.common.db import models
from fleetcache.common.db.session import Database


def project_flavors(db: Database, project_id: str | None) -> list[dict[str, Any]]:
    """The flavor (as the instance keeps it) of each instance of ``project_id`` that is not
    deleted; ``None``: the instances made without a project (noauth requests)."""
    with db.transaction() as session:
        rows = session.scalars(
            select(models.Instance.flavor).where(
                models.Instance.project_id == project_id,
                models.Instance.vm_state != instance_states.DELETED))
        return [dict(flavor or {}) for flavor in rows]
