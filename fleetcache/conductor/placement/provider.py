"""Keep one compute's resource provider in Placement in step with what the compute reported.

The provider of host ``H`` is named ``H`` and its uuid is :func:`provider_uuid` (``H``): derived,
not stored, so it is the same across restarts of the compute and of the conductor, after the
service record is deleted and the compute registers again, and for ``fleetcache-manage``, which
can find any host's provider without asking the database.

What the provider holds, from the compute's registration (``capabilities``):

* inventory: ``capabilities["inventory"]`` as the compute measured and configured it
  (:mod:`fleetcache.compute.resources`; the keys are :mod:`fleetcache.compute.rpcapi`'s),
  written as given;
* traits: ``COMPUTE_IMAGE_TYPE_<FMT>`` (os-traits) for every ``supports_image_type_<fmt>`` that
  is true, plus ``capabilities["custom_traits"]``. fleetcache owns the ``COMPUTE_IMAGE_TYPE_*``
  and ``CUSTOM_*`` traits of its providers; other traits someone else set are kept;
* aggregates: the uuids of the fleetcache aggregates the host is in, exactly.

Every part is read first and written only when it differs, with the generation it was read
at; a generation conflict (another writer got in between) re-reads and tries again, up to
``[placement] generation_conflict_retries`` times.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import os_traits

from fleetcache.common import exception
from fleetcache.compute.rpcapi import (
    CUSTOM_TRAITS_CAPABILITY,
    IMAGE_TYPE_CAPABILITY,
    INVENTORY_CAPABILITY,
)
from fleetcache.conductor.placement.client import GenerationConflict, PlacementClient

LOG = logging.getLogger(__name__)

#: uuid5 namespace of compute resource providers; never change it (providers would move).
PROVIDER_NAMESPACE = uuid.UUID("6f1bd7a0-54c8-5e2f-9a43-fc1ea0c0a8d1")

IMAGE_TYPE_TRAIT = "COMPUTE_IMAGE_TYPE_"
CUSTOM_TRAIT = "CUSTOM_"
#: Every image-type trait os-traits defines.
KNOWN_IMAGE_TYPE_TRAITS = frozenset(os_traits.get_traits(IMAGE_TYPE_TRAIT))

T = TypeVar("T")


def provider_uuid(host: str) -> str:
    """The resource provider uuid of compute ``host``: uuid5 of its name."""
    return str(uuid.uuid5(PROVIDER_NAMESPACE, host))


def image_type_traits(capabilities: dict[str, Any]) -> set[str]:
    """``COMPUTE_IMAGE_TYPE_*`` traits of the image types the capabilities claim (Nova's
    ``CAPABILITY_TRAITS_MAP``); a type os-traits does not name has no trait."""
    traits = set()
    for key, value in capabilities.items():
        if key.startswith(IMAGE_TYPE_CAPABILITY) and value is True:
            name = IMAGE_TYPE_TRAIT + key[len(IMAGE_TYPE_CAPABILITY):].upper()
            if name in KNOWN_IMAGE_TYPE_TRAITS:
                traits.add(name)
    return traits


def has_image_type_report(capabilities: dict[str, Any]) -> bool:
    """Whether a compute reported its image types at all (one that predates them did not)."""
    return any(key.startswith(IMAGE_TYPE_CAPABILITY) for key in capabilities)


def _owned(trait: str) -> bool:
    return trait.startswith((IMAGE_TYPE_TRAIT, CUSTOM_TRAIT))


@dataclasses.dataclass
class SyncResult:
    """What one synchronisation changed in Placement (empty lists: nothing)."""

    uuid: str
    created: bool = False
    inventory_changed: list[str] = dataclasses.field(default_factory=list)
    traits_added: list[str] = dataclasses.field(default_factory=list)
    traits_removed: list[str] = dataclasses.field(default_factory=list)
    aggregates_added: list[str] = dataclasses.field(default_factory=list)
    aggregates_removed: list[str] = dataclasses.field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.inventory_changed or self.traits_added
                    or self.traits_removed or self.aggregates_added or self.aggregates_removed)

    def describe(self) -> str:
        parts = []
        if self.created:
            parts.append("created")
        for label, values in (("inventory", self.inventory_changed),
                              ("+traits", self.traits_added), ("-traits", self.traits_removed),
                              ("+aggregates", self.aggregates_added),
                              ("-aggregates", self.aggregates_removed)):
            if values:
                parts.append(f"{label} {','.join(values)}")
        return "; ".join(parts) or "unchanged"


class ProviderSync:
    """Brings compute providers in Placement to what fleetcache knows of their hosts.

    :param client: the Placement client.
    :param retries: ``[placement] generation_conflict_retries``.
    """

    def __init__(self, client: PlacementClient, retries: int) -> None:
        self.client = client
        self.retries = retries

    def _retrying(self, provider: str, write: Callable[[], T]) -> T:
        for _attempt in range(self.retries + 1):
            try:
                return write()
            except GenerationConflict:
                LOG.debug("Generation conflict on resource provider %s; reading it again",
                          provider)
        raise exception.PlacementGenerationConflict(uuid=provider, attempts=self.retries + 1)

    def sync(
        self, host: str, capabilities: dict[str, Any],
        aggregates: set[str] | Callable[[], set[str]],
    ) -> SyncResult:
        """Create ``host``'s provider if needed and bring its inventory, traits and
        aggregates in step.

        :param capabilities: what the compute reported at registration.
        :param aggregates: uuids of the fleetcache aggregates ``host`` is in, or what reads
            them (see :meth:`sync_aggregates`).
        :raises PlacementError: Placement failed or kept conflicting; the caller retries later.
        """
        rp = provider_uuid(host)
        result = SyncResult(rp)
        if self.client.get_provider(rp) is None:
            result.created = self.client.create_provider(rp, host) is not None
        inventory = dict(capabilities.get(INVENTORY_CAPABILITY) or {})
        result.inventory_changed = self._retrying(
            rp, lambda: self._sync_inventory(rp, inventory))
        result.traits_added, result.traits_removed = self._retrying(
            rp, lambda: self._sync_traits(rp, self.desired_traits(capabilities)))
        result.aggregates_added, result.aggregates_removed = self._retrying(
            rp, lambda: self._sync_aggregates(rp, _reader(aggregates)))
        if result.changed:
            LOG.info("Resource provider %s (%s): %s", host, rp, result.describe())
        return result

    def sync_aggregates(self, host: str,
                        aggregates: set[str] | Callable[[], set[str]]) -> SyncResult | None:
        """Set the Placement aggregates of ``host``'s provider to ``aggregates``.

        :param aggregates: the uuids, or what reads them from the database: it is then read
            after the provider's generation, on every attempt. Two syncs of one host racing
            (a host removed from one aggregate then added to another, the two casts on two
            threads or conductors) then cannot leave the older membership in Placement: a
            sync that read the database before the other's change also read the generation
            before the other's write, so its write conflicts and it reads both again.
        :returns: what changed; ``None`` when the provider does not exist yet (the compute's
            registration will create it with its aggregates).
        :raises PlacementError:
        """
        rp = provider_uuid(host)
        if self.client.get_provider(rp) is None:
            return None
        result = SyncResult(rp)
        result.aggregates_added, result.aggregates_removed = self._retrying(
            rp, lambda: self._sync_aggregates(rp, _reader(aggregates)))
        if result.changed:
            LOG.info("Resource provider %s (%s): %s", host, rp, result.describe())
        return result

    @staticmethod
    def desired_traits(capabilities: dict[str, Any]) -> set[str]:
        """The traits fleetcache owns that ``capabilities`` call for."""
        custom = {str(t) for t in capabilities.get(CUSTOM_TRAITS_CAPABILITY) or ()
                  if str(t).startswith(CUSTOM_TRAIT)}
        return image_type_traits(capabilities) | custom

    def _sync_inventory(self, rp: str, wanted: dict[str, dict[str, Any]]) -> list[str]:
        generation, current = self.client.get_inventories(rp)
        changed = sorted(rc for rc in set(wanted) | set(current)
                         if _normalised(wanted.get(rc)) != _normalised(current.get(rc)))
        if changed:
            self.client.put_inventories(rp, generation, wanted)
        return changed

    def _sync_traits(self, rp: str, owned_wanted: set[str]) -> tuple[list[str], list[str]]:
        generation, current = self.client.get_traits(rp)
        wanted = {t for t in current if not _owned(t)} | owned_wanted
        if wanted == current:
            return [], []
        for name in sorted(wanted - current):
            if name.startswith(CUSTOM_TRAIT):
                self.client.ensure_custom_trait(name)
        self.client.put_traits(rp, generation, wanted)
        return sorted(wanted - current), sorted(current - wanted)

    def _sync_aggregates(self, rp: str,
                         read_wanted: Callable[[], set[str]]) -> tuple[list[str], list[str]]:
        generation, current = self.client.get_aggregates(rp)
        wanted = read_wanted()  # after the generation: see sync_aggregates
        if wanted == current:
            return [], []
        self.client.put_aggregates(rp, generation, wanted)
        return sorted(wanted - current), sorted(current - wanted)


def _reader(aggregates: set[str] | Callable[[], set[str]]) -> Callable[[], set[str]]:
    return aggregates if callable(aggregates) else lambda: aggregates


def _normalised(record: dict[str, Any] | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {key: float(value) if key == "allocation_ratio" else value
            for key, value in record.items()}
