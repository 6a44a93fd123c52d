"""Claims: hold a host's resources for an instance in Placement before anyone builds on it.

``PUT /allocations/{instance uuid}`` with the candidate's allocation request is atomic in
Placement: it checks capacity and bumps the provider's generation in one transaction, so when
two requests race for the last slot exactly one write succeeds and the other gets a 409. A
409 here means "this host is taken": the next host in weighed order is tried.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fleetcache.conductor.placement import PlacementClient
from fleetcache.conductor.scheduler.host_state import HostState
from fleetcache.conductor.scheduler.spec import RequestSpec

LOG = logging.getLogger(__name__)


class Claimer:
    """Claims hosts for instances and releases claims, through ``client``."""

    def __init__(self, client: PlacementClient) -> None:
        self.client = client

    def claim_first(
        self, instance_uuid: str, hosts: list[HostState], spec: RequestSpec,
        amounts: Mapping[str, int],
    ) -> tuple[HostState | None, int]:
        """Claim the first host of ``hosts`` (best first) that takes ``instance_uuid``. A host
        that refused (409) or has no room left for this request is removed from ``hosts``.

        :returns: the host claimed (its summary counts the claim), or ``None``; and the number
            of claims Placement refused.
        :raises PlacementError: Placement failed otherwise (nothing claimed by this call).
        """
        refused = 0
        while hosts:
            host = hosts[0]
            if not host.fits(amounts):
                hosts.pop(0)
                continue
            if self.client.claim_allocation(instance_uuid, host.allocation_request,
                                            spec.project_id, spec.user_id):
                host.consume(amounts)
                return host, refused
            refused += 1
            LOG.debug("Claim of %s on %s refused (409): trying the next host",
                      instance_uuid, host.host)
            hosts.pop(0)
        return None, refused

    def release(self, instance_uuid: str) -> None:
        """Delete ``instance_uuid``'s allocations (none is fine)."""
        self.client.delete_allocation(instance_uuid)

    def release_all(self, instance_uuids: list[str]) -> None:
        """Release each claim; a failure is logged and the others still released (Placement
        keeps a claim it could not delete: ``openstack resource provider allocation delete``
        removes it)."""
        for instance_uuid in instance_uuids:
            try:
                self.release(instance_uuid)
            except Exception:
                LOG.exception("Could not release the allocation of %s", instance_uuid)
