"""Request schemas: Nova's rules, and Nova's error message."""

from __future__ import annotations

import pytest

from fleetcache.api import validation
from fleetcache.api.schemas import aggregate_images, aggregates
from fleetcache.common import exception

UUID = "11111111-2222-3333-4444-555555555555"


def test_cache_schema_accepts_uuid_list() -> None:
    validation.validate({"cache": [{"id": UUID}]}, aggregate_images.CACHE_V2_81)


@pytest.mark.parametrize(
    "body",
    [{"cache": []}, {"cache": [{"id": "x"}]}, {"cache": [{"id": UUID, "a": 1}]},
     {"cache": [{"id": UUID}], "b": 2}, {}],
)
def test_cache_schema_rejects(body: object) -> None:
    with pytest.raises(exception.InvalidInput):
        validation.validate(body, aggregate_images.CACHE_V2_81)


def test_message_names_the_field() -> None:
    with pytest.raises(exception.InvalidInput) as info:
        validation.validate({"aggregate": {"name": ""}}, aggregates.CREATE)
    assert str(info.value).startswith("Invalid input for field/attribute aggregate/name.")
    assert info.value.code == 400


@pytest.mark.parametrize("name", ["a", "a b", "x" * 255, "ünïcode"])
def test_names_accepted(name: str) -> None:
    validation.validate({"aggregate": {"name": name}}, aggregates.CREATE)


def test_update_needs_name_or_zone() -> None:
    validation.validate({"aggregate": {"availability_zone": None}}, aggregates.UPDATE)
    with pytest.raises(exception.InvalidInput):
        validation.validate({"aggregate": {}}, aggregates.UPDATE)
