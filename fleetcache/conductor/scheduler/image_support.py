"""Which hosts of an aggregate cannot use an image's format, from Placement: the pre-cache
job's use of the image-type request filter (:func:`request_filters.image_type_trait`), so that
a host whose provider lacks ``COMPUTE_IMAGE_TYPE_<FMT>`` is ``unsupported`` without an RPC
call to it.

One ``GET /resource_providers?member_of=<aggregate>&required=!<TRAIT>`` per distinct format:
Placement names the providers known to lack the trait. A host Placement does not know (its
report has not reached Placement, or the aggregate mirror drifted) is not in the answer and is
asked as before; its compute answers ``unsupported`` itself if it must.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fleetcache.common import exception
from fleetcache.conductor.placement import PlacementClient, provider_uuid
from fleetcache.conductor.scheduler.request_filters import image_type_trait

LOG = logging.getLogger(__name__)


class ImageTypeSupport:
    def __init__(self, client: PlacementClient) -> None:
        self.client = client

    def unsupported(
        self, aggregate_uuid: str, hosts: Sequence[str], images: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, dict[str, str]]:
        """``{host: {image id: reason}}`` for the images each host cannot use.

        :param images: image records (``disk_format``) by id.
        """
        by_trait: dict[str, list[str]] = {}
        for image_id, image in images.items():
            trait = image_type_trait(image)
            if trait is not None:
                by_trait.setdefault(trait, []).append(image_id)
        by_provider = {provider_uuid(h): h for h in hosts}
        result: dict[str, dict[str, str]] = {}
        for trait, image_ids in sorted(by_trait.items()):
            try:
                lacking = self.client.list_providers(member_of=aggregate_uuid,
                                                     required=f"!{trait}")
            except exception.PlacementError as exc:
                LOG.warning("Cannot tell which hosts lack %s (every host is asked): %s",
                            trait, exc)
                continue
            for provider in lacking:
                host = by_provider.get(provider["uuid"])
                if host is not None:
                    for image_id in image_ids:
                        result.setdefault(host, {})[image_id] = f"host lacks trait {trait}"
        return result
