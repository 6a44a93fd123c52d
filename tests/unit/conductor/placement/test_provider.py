"""What a compute's provider should hold, from its capabilities
(fleetcache.conductor.placement.provider); the writes are tested against a real Placement in
tests/functional/conductor/test_placement_provider.py."""

from __future__ import annotations

import uuid

from fleetcache.conductor.placement.provider import (
    ProviderSync,
    SyncResult,
    has_image_type_report,
    image_type_traits,
    provider_uuid,
)


def test_provider_uuid_is_a_stable_uuid5_of_the_host_name() -> None:
    assert provider_uuid("compute1") == provider_uuid("compute1")
    assert provider_uuid("compute1") != provider_uuid("compute2")
    assert uuid.UUID(provider_uuid("compute1")).version == 5
    # pinned: a changed namespace would move every provider
    assert provider_uuid("compute1") == "eaae9553-0d91-506d-aef0-cf5bf8000cbb"


def test_image_type_traits_follow_the_true_capabilities_os_traits_names() -> None:
    caps = {"supports_image_type_raw": True, "supports_image_type_qcow2": False,
            "supports_image_type_ploop": True, "supports_image_type_nosuch": True,
            "supports_image_type_vhd": "yes", "has_imagecache": True}
    assert image_type_traits(caps) == {"COMPUTE_IMAGE_TYPE_RAW", "COMPUTE_IMAGE_TYPE_PLOOP"}


def test_desired_traits_add_only_custom_operator_traits() -> None:
    caps = {"supports_image_type_iso": True, "custom_traits": ["CUSTOM_TROVE", "HW_X"]}
    assert ProviderSync.desired_traits(caps) == {"COMPUTE_IMAGE_TYPE_ISO", "CUSTOM_TROVE"}


def test_a_report_without_image_types_is_told_apart() -> None:
    assert not has_image_type_report({"has_imagecache": True})
    assert has_image_type_report({"supports_image_type_raw": False})


def test_sync_result_describes_what_changed() -> None:
    result = SyncResult("u")
    assert not result.changed and result.describe() == "unchanged"
    result.traits_removed = ["COMPUTE_IMAGE_TYPE_QCOW2"]
    result.aggregates_added = ["a1", "a2"]
    assert result.changed
    assert result.describe() == "-traits COMPUTE_IMAGE_TYPE_QCOW2; +aggregates a1,a2"
