"""Claims: hold a host's resources for an instance in Placement before anyone builds on it.

``PUT /allocations/{instance uuid}`` with the candidate's allocation request is meant to be
atomic in Placement: it checks capacity and bumps the provider's generation in one
transaction, so that when two requests race for the last slot one write succeeds and the
other gets a 409. A 409 here means "this host is taken": the next host in weighed order is
tried.

Placement does not always keep that promise, so each accepted claim is checked: the
provider's usage must not exceed its capacity in any class the claim took. openstack-placement
16.0.0 retries a write that lost a generation race (``allocation_conflict_retry_count``,
default 10) inside the same database transaction, whose rows from the failed attempt are not
rolled back; the retry counts them as usage that existed before, and its "no worse than the
existing overage" exemption then accepts a claim beyond capacity. Seen on the stack: five
parallel whole-host boots for three hosts, three claims of 2 VCPU accepted on a 2-VCPU host
("Over capacity for VCPU ... but allocation of 2 reduces existing overage from 4 to 4" in
Placement's log; 9 of 10 rounds of 5 concurrent whole-provider PUTs on a bare Placement
16.0.0 under gunicorn on PostgreSQL left it over capacity, up to 5 times). A claim found over
capacity is released and counts as refused: the later of two racers always sees it, so a slot
is never held twice. The earlier may see it too, and then both move on: 5 concurrent claimers
for 3 one-slot providers were never over capacity in 10 rounds, but left a slot empty in 3. So
run Placement with ``[placement] allocation_conflict_retry_count = 1``: it then refuses the
loser itself (409 ``placement.concurrent_update``; 20 such rounds filled all three providers
every time), as ``tools/stack.sh`` does.
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
        :raises PlacementError: Placement failed otherwise (nothing claimed by this call: a
            claim Placement may have taken before it failed is released first).
        """
        refused = 0
        while hosts:
            host = hosts[0]
            if not host.fits(amounts):
                hosts.pop(0)
                continue
            try:
                if self._claim_checked(instance_uuid, host, spec, amounts):
                    host.consume(amounts)
                    return host, refused
            except BaseException:
                # The PUT may have been applied although its answer was lost, or Placement
                # accepted the claim and failed the capacity check's reads. The release is a
                # DELETE of this instance's own consumer (it held nothing before this call; a
                # 404 is fine); its own failure is logged and the first error kept.
                self.release_all([instance_uuid])
                raise
            refused += 1
            hosts.pop(0)
        return None, refused

    def _claim_checked(self, instance_uuid: str, host: HostState, spec: RequestSpec,
                       amounts: Mapping[str, int]) -> bool:
        """Claim ``host`` for ``instance_uuid`` and check the claim against its capacity.

        :returns: True when the claim holds; False when Placement refused it (409) or it was
            over capacity and has been released.
        :raises PlacementError: the claim, the check or the release failed; the claim may
            then be held.
        """
        if not self.client.claim_allocation(instance_uuid, host.allocation_request,
                                            spec.project_id, spec.user_id):
            LOG.debug("Claim of %s on %s refused (409): trying the next host",
                      instance_uuid, host.host)
            return False
        over = self._over_capacity(host.provider_uuid, amounts)
        if not over:
            return True
        LOG.warning("Placement accepted the claim of %s on %s beyond its capacity (%s): a "
                    "racing claim got in; releasing it and trying the next host",
                    instance_uuid, host.host, ", ".join(over))
        self.release(instance_uuid)
        return False

    def _over_capacity(self, provider: str, amounts: Mapping[str, int]) -> list[str]:
        """The classes of ``amounts`` whose usage on ``provider`` now exceeds its capacity
        (``(total - reserved) * allocation_ratio``, as Placement computes it), as
        ``"VCPU 4/2"``; empty when the claim holds."""
        usages = self.client.get_usages(provider)
        _generation, inventories = self.client.get_inventories(provider)
        over = []
        for rc, amount in amounts.items():
            inventory = inventories.get(rc)
            if not amount or inventory is None:
                continue
            capacity = (inventory["total"] - inventory["reserved"]) * inventory["allocation_ratio"]
            used = usages.get(rc, 0)
            if used > capacity:
                over.append(f"{rc} {used}/{capacity:g}")
        return over

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
                LOG.exception("Could not release the allocation of %s; `openstack resource "
                              "provider allocation delete %s` removes it", instance_uuid,
                              instance_uuid)
