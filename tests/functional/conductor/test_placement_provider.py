"""fleetcache.conductor.placement against a real Placement (in-process, SQLite): a compute's
provider is created, its inventory, traits and aggregates written only when they differ, and a
generation conflict from a concurrent writer is retried."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fleetcache.common import exception
from fleetcache.conductor.placement import PlacementClient, ProviderSync, provider_uuid
from tests.functional.conftest import unique_host, unreachable

AGG1 = "5c0a1f3e-1111-4c3b-9a55-6a2b8e0e0001"
AGG2 = "5c0a1f3e-2222-4c3b-9a55-6a2b8e0e0002"


def _record(total: int, reserved: int = 0, ratio: float = 1.0) -> dict[str, Any]:
    return {"total": total, "reserved": reserved, "min_unit": 1, "max_unit": total,
            "step_size": 1, "allocation_ratio": ratio}


def capabilities(**overrides: Any) -> dict[str, Any]:
    caps: dict[str, Any] = {
        "has_imagecache": True,
        "supports_image_type_raw": True,
        "supports_image_type_qcow2": True,
        "supports_image_type_ploop": False,
        "inventory": {"VCPU": _record(8, 0, 4.0), "MEMORY_MB": _record(16384, 512),
                      "DISK_GB": _record(200)},
        "custom_traits": ["CUSTOM_TROVE"],
    }
    caps.update(overrides)
    return caps


class CountingClient(PlacementClient):
    """The real client, counting writes (PUT and POST) by path."""

    def __init__(self, inner: PlacementClient) -> None:
        super().__init__(inner._adapter)
        self.writes: list[str] = []

    def _request(self, method: str, url: str, ok: tuple[int, ...], **kwargs: Any) -> Any:
        if method in ("PUT", "POST"):
            self.writes.append(f"{method} {url}")
        return super()._request(method, url, ok, **kwargs)


def test_first_sync_creates_the_provider_with_inventory_traits_and_aggregates(
    placement_client: PlacementClient,
) -> None:
    host = unique_host()
    result = ProviderSync(placement_client, 3).sync(host, capabilities(), {AGG1})

    rp = provider_uuid(host)
    assert result.created and result.uuid == rp
    provider = placement_client.get_provider(rp)
    assert provider is not None and provider["name"] == host
    _, inventory = placement_client.get_inventories(rp)
    assert inventory["VCPU"]["total"] == 8 and inventory["VCPU"]["allocation_ratio"] == 4.0
    assert inventory["MEMORY_MB"]["reserved"] == 512
    assert set(inventory) == {"VCPU", "MEMORY_MB", "DISK_GB"}
    _, traits = placement_client.get_traits(rp)
    assert traits == {"COMPUTE_IMAGE_TYPE_RAW", "COMPUTE_IMAGE_TYPE_QCOW2", "CUSTOM_TROVE"}
    assert placement_client.get_aggregates(rp)[1] == {AGG1}


def test_a_second_sync_of_the_same_report_writes_nothing(
    placement_client: PlacementClient,
) -> None:
    host = unique_host()
    ProviderSync(placement_client, 3).sync(host, capabilities(), {AGG1})
    counting = CountingClient(placement_client)

    result = ProviderSync(counting, 3).sync(host, capabilities(), {AGG1})

    assert not result.changed
    assert counting.writes == []


def test_changes_are_written_and_reported(placement_client: PlacementClient) -> None:
    host = unique_host()
    sync = ProviderSync(placement_client, 3)
    sync.sync(host, capabilities(), {AGG1})
    changed = capabilities(supports_image_type_qcow2=False, custom_traits=[])
    changed["inventory"]["DISK_GB"] = _record(100)
    counting = CountingClient(placement_client)

    result = ProviderSync(counting, 3).sync(host, changed, {AGG2})

    rp = provider_uuid(host)
    assert result.inventory_changed == ["DISK_GB"]
    assert result.traits_removed == ["COMPUTE_IMAGE_TYPE_QCOW2", "CUSTOM_TROVE"]
    assert (result.aggregates_added, result.aggregates_removed) == ([AGG2], [AGG1])
    assert placement_client.get_traits(rp)[1] == {"COMPUTE_IMAGE_TYPE_RAW"}
    assert placement_client.get_inventories(rp)[1]["DISK_GB"]["total"] == 100
    assert sorted(w.rsplit("/", 1)[-1] for w in counting.writes) == [
        "aggregates", "inventories", "traits"]


def test_traits_fleetcache_does_not_own_are_kept(placement_client: PlacementClient) -> None:
    host = unique_host()
    sync = ProviderSync(placement_client, 3)
    sync.sync(host, capabilities(), set())
    rp = provider_uuid(host)
    generation, traits = placement_client.get_traits(rp)
    placement_client.put_traits(rp, generation, traits | {"HW_CPU_X86_AVX2"})

    sync.sync(host, capabilities(supports_image_type_raw=False), set())

    assert placement_client.get_traits(rp)[1] == {
        "COMPUTE_IMAGE_TYPE_QCOW2", "CUSTOM_TROVE", "HW_CPU_X86_AVX2"}


class RacingClient(CountingClient):
    """Before each of its first ``races`` trait writes, another writer changes the provider
    (Placement bumps its generation), as a concurrent conductor would."""

    def __init__(self, inner: PlacementClient, races: int) -> None:
        super().__init__(inner)
        self.other = inner
        self.races = races

    def put_traits(self, uuid: str, generation: int, traits: set[str]) -> int:
        if self.races:
            self.races -= 1
            other_generation, current = self.other.get_traits(uuid)
            self.other.put_traits(uuid, other_generation, current ^ {"HW_CPU_X86_SSE"})
        return super().put_traits(uuid, generation, traits)


def test_a_generation_conflict_is_read_again_and_retried(
    placement_client: PlacementClient,
) -> None:
    host = unique_host()
    ProviderSync(placement_client, 3).sync(host, capabilities(), set())
    racing = RacingClient(placement_client, races=2)

    result = ProviderSync(racing, 3).sync(
        host, capabilities(supports_image_type_qcow2=False), set())

    assert result.traits_removed == ["COMPUTE_IMAGE_TYPE_QCOW2"]
    trait_writes = [w for w in racing.writes if w.endswith("/traits")]
    assert len(trait_writes) == 3  # two lost to the other writer, the third landed
    assert "COMPUTE_IMAGE_TYPE_QCOW2" not in placement_client.get_traits(provider_uuid(host))[1]


def test_conflicts_beyond_the_retries_raise(placement_client: PlacementClient) -> None:
    host = unique_host()
    ProviderSync(placement_client, 3).sync(host, capabilities(), set())
    racing = RacingClient(placement_client, races=10)

    with pytest.raises(exception.PlacementGenerationConflict):
        ProviderSync(racing, 2).sync(host, capabilities(custom_traits=[]), set())
    assert len([w for w in racing.writes if w.endswith("/traits")]) == 3


class InterleavingClient(CountingClient):
    """Runs ``meanwhile`` once, just before the first read of a provider's aggregates (and
    so of its generation) answers: another sync's whole change lands there."""

    def __init__(self, inner: PlacementClient, meanwhile: Callable[[], object]) -> None:
        super().__init__(inner)
        self.meanwhile: Callable[[], object] | None = meanwhile

    def get_aggregates(self, uuid: str) -> tuple[int, set[str]]:
        if self.meanwhile is not None:
            run, self.meanwhile = self.meanwhile, None
            run()
        return super().get_aggregates(uuid)


def test_two_racing_aggregate_syncs_leave_the_newest_membership(
    placement_client: PlacementClient,
) -> None:
    """A host moves from AGG1 to AGG2 (two changes, two casts). The first sync starts; the
    change to AGG2 and the second sync land before it reads the provider's generation. Had
    it read the database first, it would now write AGG1 back with a fresh generation; it
    reads the database after the generation, so Placement keeps AGG2."""
    host = unique_host()
    ProviderSync(placement_client, 3).sync(host, capabilities(), {AGG1})
    database = {"aggregates": {AGG1}}

    def the_other_change() -> None:
        database["aggregates"] = {AGG2}
        ProviderSync(placement_client, 3).sync_aggregates(host, lambda: database["aggregates"])

    first = ProviderSync(InterleavingClient(placement_client, the_other_change), 3)
    first.sync_aggregates(host, lambda: database["aggregates"])
    assert placement_client.get_aggregates(provider_uuid(host))[1] == {AGG2}


def test_sync_aggregates_leaves_a_host_without_provider_alone(
    placement_client: PlacementClient,
) -> None:
    host = unique_host()
    assert ProviderSync(placement_client, 3).sync_aggregates(host, {AGG1}) is None
    assert placement_client.get_provider(provider_uuid(host)) is None


def test_an_unreachable_placement_is_a_placement_error(
    placement_client: PlacementClient,
) -> None:
    with pytest.raises(exception.PlacementError):
        ProviderSync(unreachable(placement_client), 3).sync(unique_host(), capabilities(), set())
