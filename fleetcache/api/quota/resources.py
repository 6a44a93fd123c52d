"""Quota resource names: Keystone's unified limit names, and the legacy names Nova's quota
APIs show them under (``nova/limit/placement.py`` and ``nova/limit/local.py``).

A registered limit or a project limit is named by its unified name (``servers``,
``class:VCPU``); ``GET /limits`` and ``/os-quota-sets`` answer with the legacy ones
(``instances``, ``cores``), as Nova with unified limits does.
"""

from __future__ import annotations

SERVERS = "servers"
CLASS_PREFIX = "class:"
SERVER_METADATA_ITEMS = "server_metadata_items"

#: Counted per project: unified name -> legacy name.
COUNTED = {
    SERVERS: "instances",
    CLASS_PREFIX + "VCPU": "cores",
    CLASS_PREFIX + "MEMORY_MB": "ram",
}
#: Nova's limits that apply to one request (and the key pairs and server groups fleetcache
#: has none of): their registered limit is every project's, a project limit is not read.
REGISTERED_ONLY = {
    SERVER_METADATA_ITEMS: "metadata_items",
    "server_injected_files": "injected_files",
    "server_injected_file_content_bytes": "injected_file_content_bytes",
    "server_injected_file_path_bytes": "injected_file_path_bytes",
    "server_key_pairs": "key_pairs",
    "server_groups": "server_groups",
    "server_group_members": "server_group_members",
}
#: Nova-network's quotas, kept in the answers below 2.36 as Nova keeps them: always -1.
UNLIMITED = ("fixed_ips", "floating_ips", "security_groups", "security_group_rules")

#: Every legacy name a quota set lists, in Nova's order (``nova.quota.QUOTAS``).
LEGACY_NAMES = (
    "cores", "injected_files", "injected_file_content_bytes", "injected_file_path_bytes",
    "instances", "key_pairs", "metadata_items", "ram", "server_groups", "server_group_members",
    *UNLIMITED,
)

#: What the metadata of one server may hold when no limit is read from Keystone (the
#: ``noop`` driver): Nova's ``metadata_items`` default, which fleetcache keeps as a cap.
DEFAULT_METADATA_ITEMS = 128


def resource_class_name(resource_class: str) -> str:
    """The unified limit name of a Placement resource class (``VCPU`` -> ``class:VCPU``)."""
    return CLASS_PREFIX + resource_class


def legacy_name(unified: str) -> str:
    """The name Nova's quota APIs show a unified limit under (itself when it has none:
    ``class:DISK_GB``)."""
    return COUNTED.get(unified) or REGISTERED_ONLY.get(unified) or unified
