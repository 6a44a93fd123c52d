"""What a scheduling request says and what it returns: plain frozen values, so that the boot
path (which builds them) and the scheduler (which reads them) share one shape and nothing in a
request changes under a filter."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from fleetcache.image.source import CORE_FIELDS


@dataclasses.dataclass(frozen=True)
class FlavorSpec:
    """The flavor an instance is built with: its resources and extra specs."""

    flavorid: str
    vcpus: int
    memory_mb: int
    root_gb: int
    #: e.g. ``{"aggregate_instance_extra_specs:ssd": "true", "trait:CUSTOM_X": "required"}``
    extra_specs: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class RequestSpec:
    """One boot request, ``min_count``..``max_count`` already expanded into instance uuids."""

    instance_uuids: Sequence[str]
    project_id: str
    user_id: str
    flavor: FlavorSpec
    #: The Glance image record as ``fleetcache.image.source`` returns it (``id``,
    #: ``disk_format``, ``properties``, ...).
    image: Mapping[str, Any]
    availability_zone: str | None = None
    #: From the admin's ``zone:host`` form on a new build: only this host, host filters not
    #: consulted (Nova's ``force_hosts``). Never set for a rebuild (see ``__post_init__``).
    force_host: str | None = None
    #: Only this host, the host filters consulted all the same (Nova's
    #: ``requested_destination``): a rebuild's own host, judged by the filters that
    #: ``run_on_rebuild``.
    requested_destination: str | None = None
    #: Fewer than this many placed: ``NoValidHost`` and nothing stays claimed.
    min_count: int = 1
    #: False for a rebuild: the instances keep the allocation they hold on
    #: ``requested_destination``, so the request is only checked again (Nova's rebuild claims
    #: nothing either).
    claim: bool = True

    def __post_init__(self) -> None:
        """A rebuild with ``force_host`` would skip every host filter, so a project member
        could put an image the isolation filters keep off a host onto it (Nova bug 1664931,
        OSSA-2017-005, CVE-2017-16239): refused here rather than trusted to each caller."""
        if self.force_host and not self.claim:
            raise ValueError("A rebuild (claim=False) is checked on its host with "
                             "requested_destination, not force_host, which skips the host "
                             "filters")

    @property
    def image_properties(self) -> Mapping[str, Any]:
        """The image's own properties: Glance v2 puts them at the top level beside the core
        fields (``ImageMeta.to_dict``); a record that nests them under ``properties`` is read
        too."""
        props = {k: v for k, v in self.image.items()
                 if k not in CORE_FIELDS and k != "properties"}
        nested = self.image.get("properties")
        if isinstance(nested, Mapping):
            props.update(nested)
        return props

    @property
    def image_id(self) -> str | None:
        value = self.image.get("id")
        return str(value) if value is not None else None


@dataclasses.dataclass(frozen=True)
class Selection:
    """Where one instance goes, with the allocation that holds its resources there."""

    instance_uuid: str
    host: str
    cell_id: int | None
    provider_uuid: str
    #: What was PUT to ``/allocations/{instance_uuid}`` (``allocations``, ``mappings``).
    allocation_request: Mapping[str, Any]
