"""The Placement resources one server of a flavor takes: what the scheduler claims for it and
what the API counts against the project's quota, from the same rule.

``VCPU``, ``MEMORY_MB`` and ``DISK_GB`` (the root disk: fleetcache builds no ephemeral or
swap disk) from the flavor's fields; a ``resources:<RC>=<N>`` extra spec overrides a class or
adds one, and ``0`` drops it, as in Nova (``nova.scheduler.utils.ResourceRequest``)::

    >>> resource_amounts(2, 512, 1, {"resources:DISK_GB": "0", "resources:VGPU": "1"})
    {'VCPU': 2, 'MEMORY_MB': 512, 'VGPU': 1}
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

LOG = logging.getLogger(__name__)

RESOURCES_PREFIX = "resources:"


def resource_amounts(vcpus: int, memory_mb: int, root_gb: int,
                     extra_specs: Mapping[str, str]) -> dict[str, int]:
    """The amount of each resource class one server takes (classes of 0 left out).

    A ``resources:`` extra spec whose value is not an integer is ignored (logged): Nova's
    extra-spec validation would have refused it, fleetcache's flavors API accepts any text.
    """
    amounts = {"VCPU": vcpus, "MEMORY_MB": memory_mb, "DISK_GB": root_gb}
    for key, value in extra_specs.items():
        if key.startswith(RESOURCES_PREFIX):
            try:
                amounts[key[len(RESOURCES_PREFIX):]] = int(value)
            except ValueError:
                LOG.warning("Ignoring the flavor's %s=%r (not an integer)", key, value)
    return {rc: n for rc, n in amounts.items() if n > 0}
