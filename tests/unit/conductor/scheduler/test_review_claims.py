"""Review findings on claims (fleetcache.conductor.scheduler.claim / destinations): a claim
Placement accepted must not outlive a failure of the request that made it."""

from __future__ import annotations

from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.db.session import Database
from tests.unit.conductor.scheduler.helpers import spec
from tests.unit.conductor.scheduler.test_destinations import (
    CTXT,
    ScriptedPlacement,
    candidates,
    computes,  # noqa: F401 - the fixture
    scheduler,
)


class UsagesDown(ScriptedPlacement):
    """Accepts the claim, then fails the over-capacity check's read (Placement restarted,
    a proxy timed out, a 503 from the API's WSGI server)."""

    def get_usages(self, uuid: str) -> dict[str, Any]:
        raise exception.PlacementError(method="GET", url=f"/resource_providers/{uuid}/usages",
                                       reason="503 Service Unavailable")


def test_a_claim_accepted_before_placement_fails_is_released(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]  # noqa: F811
) -> None:
    client = UsagesDown([candidates({"c1": 4096})])
    with pytest.raises(exception.PlacementError):
        scheduler(conf, db, client).select_destinations(CTXT, spec())
    # select_destinations promises "PlacementError: Placement failed; nothing stays claimed"
    assert client.claims == {}, f"claim left in Placement: {client.claims}"
