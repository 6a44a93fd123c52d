"""select_destinations with a scripted Placement client: claims in weighed order, a refused
claim (409) tries the next host, N instances claim in turn (candidates refreshed once when the
hosts run out), and on failure every claim of the request is released."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.common import binaries, exception
from fleetcache.common.context import get_admin_context
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from fleetcache.conductor.placement.provider import provider_uuid
from fleetcache.conductor.scheduler import Scheduler
from fleetcache.conductor.scheduler.filters import BaseHostFilter
from fleetcache.conductor.scheduler.host_state import HostState
from fleetcache.conductor.scheduler.request import FilterRequest
from tests.unit.conductor.scheduler.helpers import spec

CTXT = get_admin_context()


def candidates(hosts: Mapping[str, int]) -> dict[str, Any]:
    """A candidates response: one provider per host with ``free`` MB of RAM."""
    requests, summaries = [], {}
    for name, free in hosts.items():
        rp = provider_uuid(name)
        requests.append({"allocations": {rp: {"resources": {"VCPU": 1, "MEMORY_MB": 512}}},
                         "mappings": {"": [rp]}})
        summaries[rp] = {"resources": {"VCPU": {"capacity": 8, "used": 0},
                                       "MEMORY_MB": {"capacity": free, "used": 0}},
                         "traits": [], "root_provider_uuid": rp, "parent_provider_uuid": None}
    return {"allocation_requests": requests, "provider_summaries": summaries}


class ScriptedPlacement:
    """Returns canned candidates; refuses claims on the hosts in ``full``; accepts claims on
    the hosts in ``overbooked`` beyond their capacity (Placement 16.0.0's retried write)."""

    def __init__(self, responses: list[dict[str, Any]], full: set[str] | None = None,
                 overbooked: set[str] | None = None) -> None:
        self.responses = responses
        self.full = {provider_uuid(h) for h in full or ()}
        self.overbooked = {provider_uuid(h) for h in overbooked or ()}
        self.queries: list[list[tuple[str, str]]] = []
        self.claims: dict[str, str] = {}
        self.attempts: list[tuple[str, str]] = []
        self.deleted: list[str] = []

    def get_allocation_candidates(self, params: list[tuple[str, str]]) -> dict[str, Any]:
        self.queries.append(params)
        return self.responses[min(len(self.queries), len(self.responses)) - 1]

    def claim_allocation(self, consumer: str, allocation_request: Mapping[str, Any],
                         project_id: str, user_id: str) -> bool:
        rp = next(iter(allocation_request["allocations"]))
        self.attempts.append((consumer, rp))
        if rp in self.full:
            return False
        self.claims[consumer] = rp
        return True

    def delete_allocation(self, consumer: str) -> None:
        self.deleted.append(consumer)
        self.claims.pop(consumer, None)

    def get_inventories(self, uuid: str) -> tuple[int, dict[str, dict[str, Any]]]:
        return 1, {"VCPU": {"total": 4, "reserved": 0, "allocation_ratio": 2.0}}

    def get_usages(self, uuid: str) -> dict[str, int]:
        """Within the 8 VCPU of capacity, unless the provider is overbooked."""
        return {"VCPU": 9 if uuid in self.overbooked else 1}


@pytest.fixture
def computes(db: Database) -> list[str]:
    names = ["c1", "c2", "c3"]
    for name in names:
        db_services.service_register(db, name, binaries.COMPUTE, "compute", None, {})
    return names


def scheduler(conf: cfg.ConfigOpts, db: Database, client: ScriptedPlacement) -> Scheduler:
    return Scheduler(conf, db, client)  # type: ignore[arg-type]


def test_best_host_claimed(conf: cfg.ConfigOpts, db: Database, computes: list[str]) -> None:
    client = ScriptedPlacement([candidates({"c1": 1024, "c2": 8192, "c3": 2048})])
    [selection] = scheduler(conf, db, client).select_destinations(CTXT, spec())
    assert selection.host == "c2" and selection.provider_uuid == provider_uuid("c2")
    assert selection.cell_id is None
    assert client.claims == {selection.instance_uuid: provider_uuid("c2")}
    assert len(client.queries) == 1


def test_refused_claim_tries_the_next_host(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    client = ScriptedPlacement([candidates({"c1": 1024, "c2": 8192, "c3": 2048})], full={"c2"})
    [selection] = scheduler(conf, db, client).select_destinations(CTXT, spec())
    assert selection.host == "c3"
    assert [rp for _, rp in client.attempts] == [provider_uuid("c2"), provider_uuid("c3")]


class CommittedLate(ScriptedPlacement):
    """Refuses every claim, but the first attempt on a full host commits after all: a PUT that
    timed out, sent again, whose first attempt Placement applied after answering the second
    with a 409 and the allocations read with nothing."""

    def claim_allocation(self, consumer: str, allocation_request: Mapping[str, Any],
                         project_id: str, user_id: str) -> bool:
        if not super().claim_allocation(consumer, allocation_request, project_id, user_id):
            self.claims.setdefault(consumer, next(iter(allocation_request["allocations"])))
        return False


def test_an_instance_whose_claims_were_all_refused_is_released(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    client = CommittedLate([candidates({"c1": 1024, "c2": 8192})], full={"c1", "c2"})
    with pytest.raises(exception.NoValidHost):
        scheduler(conf, db, client).select_destinations(CTXT, spec())
    assert len(client.attempts) == 4  # both hosts, then both again from fresh candidates
    assert client.claims == {}
    assert client.deleted == [client.attempts[0][0]]


def test_an_instance_that_claimed_nothing_is_not_released(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    client = ScriptedPlacement([candidates({"c1": 256})])  # no room for the flavor's 512 MB
    with pytest.raises(exception.NoValidHost):
        scheduler(conf, db, client).select_destinations(CTXT, spec())
    assert client.attempts == [] and client.deleted == []


def test_claim_placement_accepted_beyond_capacity_is_released_and_the_next_host_tried(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    client = ScriptedPlacement([candidates({"c1": 1024, "c2": 8192, "c3": 2048})],
                               overbooked={"c2"})
    [selection] = scheduler(conf, db, client).select_destinations(CTXT, spec())
    assert selection.host == "c3"
    assert [rp for _, rp in client.attempts] == [provider_uuid("c2"), provider_uuid("c3")]
    assert client.deleted == [selection.instance_uuid]
    assert client.claims == {selection.instance_uuid: provider_uuid("c3")}


def test_every_host_overbooked_is_no_valid_host_with_nothing_claimed(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    client = ScriptedPlacement([candidates({"c1": 1024, "c2": 8192})], overbooked={"c1", "c2"})
    with pytest.raises(exception.NoValidHost):
        scheduler(conf, db, client).select_destinations(CTXT, spec())
    assert client.claims == {}


def test_instances_claim_in_turn_and_respect_room(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    # c2 has room for two 512 MB instances, c1 for one
    client = ScriptedPlacement([candidates({"c1": 512, "c2": 1024})])
    selections = scheduler(conf, db, client).select_destinations(CTXT, spec(n=3))
    assert sorted(s.host for s in selections) == ["c1", "c2", "c2"]
    assert [s.instance_uuid for s in selections] == list(spec(n=3).instance_uuids)


def test_exhausted_hosts_refresh_candidates_once(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    client = ScriptedPlacement([candidates({"c1": 512}), candidates({"c3": 4096})])
    selections = scheduler(conf, db, client).select_destinations(CTXT, spec(n=2))
    assert [s.host for s in selections] == ["c1", "c3"]
    assert len(client.queries) == 2


def test_failure_releases_every_claim_of_the_request(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    client = ScriptedPlacement([candidates({"c1": 512}), candidates({})])
    with pytest.raises(exception.NoValidHost) as caught:
        scheduler(conf, db, client).select_destinations(CTXT, spec(n=2, min_count=2))
    assert client.claims == {}
    assert client.deleted == [spec(n=2).instance_uuids[0]]
    assert str(caught.value) == "No valid host was found. There are not enough hosts available."


def test_min_count_allows_a_partial_result(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    client = ScriptedPlacement([candidates({"c1": 512}), candidates({})])
    selections = scheduler(conf, db, client).select_destinations(CTXT, spec(n=3, min_count=1))
    assert [s.host for s in selections] == ["c1"]
    assert client.deleted == []


def test_no_valid_host_carries_the_filter_summary(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    db_services.service_update(db, db_services.service_get(db, "c1", binaries.COMPUTE)["id"],
                               disabled=True)
    client = ScriptedPlacement([candidates({"c1": 4096})])
    with pytest.raises(exception.NoValidHost) as caught:
        scheduler(conf, db, client).select_destinations(CTXT, spec())
    assert caught.value.filter_summary == [("Placement", 3, 1), ("ComputeFilter", 1, 0)]
    assert client.attempts == []


def test_placement_error_releases_claims(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    class Failing(ScriptedPlacement):
        def claim_allocation(self, consumer: str, allocation_request: Mapping[str, Any],
                             project_id: str, user_id: str) -> bool:
            if self.claims:
                raise exception.PlacementError(method="PUT", url="/allocations", reason="down")
            return super().claim_allocation(consumer, allocation_request, project_id, user_id)

    client = Failing([candidates({"c1": 4096})])
    with pytest.raises(exception.PlacementError):
        scheduler(conf, db, client).select_destinations(CTXT, spec(n=2))
    assert client.claims == {}


class AppliedThenLost(ScriptedPlacement):
    """Applies the claim, but its answer never arrives (a proxy timed out, the connection
    dropped after Placement committed)."""

    def claim_allocation(self, consumer: str, allocation_request: Mapping[str, Any],
                         project_id: str, user_id: str) -> bool:
        super().claim_allocation(consumer, allocation_request, project_id, user_id)
        raise exception.PlacementError(method="PUT", url=f"/allocations/{consumer}",
                                       reason="Read timed out")


class UsagesDown(ScriptedPlacement):
    """Accepts the claim, then fails the over-capacity check's read (Placement restarted,
    a 503 from its WSGI server)."""

    def get_usages(self, uuid: str) -> dict[str, int]:
        raise exception.PlacementError(method="GET", url=f"/resource_providers/{uuid}/usages",
                                       reason="503 Service Unavailable")


class ReleaseDown(ScriptedPlacement):
    """Accepts the claim beyond capacity (the test overbooks every host), then fails the
    DELETE that gives it back, once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.delete_failures = 1

    def delete_allocation(self, consumer: str) -> None:
        if self.delete_failures:
            self.delete_failures -= 1
            raise exception.PlacementError(method="DELETE", url=f"/allocations/{consumer}",
                                           reason="503 Service Unavailable")
        super().delete_allocation(consumer)


@pytest.mark.parametrize("placement", [AppliedThenLost, UsagesDown, ReleaseDown])
def test_a_claim_placement_took_before_it_failed_is_released(
    conf: cfg.ConfigOpts, db: Database, computes: list[str], placement: type[ScriptedPlacement]
) -> None:
    client = placement([candidates({"c1": 4096})], overbooked={"c1"})
    with pytest.raises(exception.PlacementError):
        scheduler(conf, db, client).select_destinations(CTXT, spec())
    # select_destinations promises "PlacementError: Placement failed; nothing stays claimed"
    assert client.claims == {}, f"claim left in Placement: {client.claims}"


def test_unknown_zone_fails_without_asking_placement(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    client = ScriptedPlacement([candidates({"c1": 4096})])
    with pytest.raises(exception.NoValidHost):
        scheduler(conf, db, client).select_destinations(CTXT, spec(availability_zone="nowhere"))
    assert client.queries == []


def test_forced_host_skips_host_filters(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    db_services.service_update(db, db_services.service_get(db, "c1", binaries.COMPUTE)["id"],
                               disabled=True)
    client = ScriptedPlacement([candidates({"c1": 4096})])
    [selection] = scheduler(conf, db, client).select_destinations(CTXT, spec(force_host="c1"))
    assert selection.host == "c1"
    assert ("in_tree", provider_uuid("c1")) in client.queries[0]


class RefusesEveryImage(BaseHostFilter):
    """A filter about the image (``run_on_rebuild`` left True)."""

    def host_fails(self, host: HostState, request: FilterRequest) -> str | None:
        return "image refused"


def test_a_rebuild_is_checked_by_the_filters_that_judge_the_image(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    client = ScriptedPlacement([candidates({"c1": 4096})])
    chosen = Scheduler(conf, db, client,  # type: ignore[arg-type]
                       host_filters=[RefusesEveryImage(conf)])
    rebuild = spec(requested_destination="c1", claim=False)
    with pytest.raises(exception.NoValidHost) as caught:
        chosen.select_destinations(CTXT, rebuild)
    assert caught.value.filter_summary == [("Placement", 3, 1), ("RefusesEveryImage", 1, 0)]
    assert ("in_tree", provider_uuid("c1")) in client.queries[0]
    assert client.attempts == []


def test_a_rebuild_on_a_disabled_host_is_not_refused_for_it(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    # Nova's errata to OSSA-2017-005: ComputeFilter (like AvailabilityZoneFilter and
    # AggregateInstanceExtraSpecsFilter) does not run on rebuild, whose host keeps its
    # instances when disabled. A new build is still kept off the host.
    db_services.service_update(db, db_services.service_get(db, "c1", binaries.COMPUTE)["id"],
                               disabled=True)
    client = ScriptedPlacement([candidates({"c1": 4096})])
    rebuild = spec(requested_destination="c1", claim=False)
    [selection] = scheduler(conf, db, client).select_destinations(CTXT, rebuild)
    assert selection.host == "c1" and client.attempts == []
    with pytest.raises(exception.NoValidHost):
        scheduler(conf, db, client).select_destinations(CTXT, spec())


def test_a_rebuild_cannot_force_a_host() -> None:
    # force_host skips the host filters: on a rebuild that is Nova bug 1664931
    with pytest.raises(ValueError, match="requested_destination"):
        spec(force_host="c1", claim=False)


def test_provider_that_is_no_compute_is_ignored(
    conf: cfg.ConfigOpts, db: Database, computes: list[str]
) -> None:
    client = ScriptedPlacement([candidates({"someone-elses": 8192, "c1": 1024})])
    [selection] = scheduler(conf, db, client).select_destinations(CTXT, spec())
    assert selection.host == "c1"


def test_no_valid_host_survives_rpc_kwargs() -> None:
    exc = exception.NoValidHost(reason="x", filter_summary=[["ComputeFilter", 3, 0]])
    again = exception.NoValidHost(**exc.kwargs)
    assert again.filter_summary == [("ComputeFilter", 3, 0)]
    assert str(again) == "No valid host was found. x"
