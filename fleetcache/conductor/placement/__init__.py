"""The conductor's side of OpenStack Placement: one resource provider per compute host.

* ``client.py``: HTTP to Placement through a keystoneauth Adapter (``[placement]`` options);
* ``provider.py``: what a compute's provider should hold (inventory, traits, aggregates) from
  what the compute reported and the aggregates it is in, and the writes that bring Placement
  there, retried on generation conflicts.
"""

from fleetcache.conductor.placement.client import PlacementClient
from fleetcache.conductor.placement.provider import ProviderSync, SyncResult, provider_uuid

__all__ = ["PlacementClient", "ProviderSync", "SyncResult", "provider_uuid"]
