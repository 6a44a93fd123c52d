"""The strict image isolation key of aggregate metadata (seed 002), shared by the API, which
refuses a value that names no property, and the scheduler, which applies it."""

from __future__ import annotations

#: Aggregate metadata naming the image property(ies) (comma-separated) an aggregate isolates:
#: it takes only images carrying one of them, and images carrying one go only to such
#: aggregates (AggregateImageStrictIsolation).
ISOLATION_KEY = "image_isolation_property"


def split_values(value: str) -> set[str]:
    """A metadata value as the set of its comma-separated items, stripped (Nova's
    ``aggregate_metadata_get_by_host``)."""
    return {item.strip() for item in value.split(",")}


def isolated_properties(value: str) -> set[str]:
    """The image properties an ``image_isolation_property`` value names (empty items
    dropped); an empty set would make an aggregate that takes no image at all."""
    return {p for p in split_values(value) if p}
