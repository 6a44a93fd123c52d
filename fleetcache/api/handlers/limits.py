"""``GET /limits``: the project's absolute limits and usage, as Nova answers with unified
limits (nova/api/openstack/compute/limits.py and views/limits.py). ``rate`` is always empty.

Each legacy quota is shown under Nova's names (``instances`` as ``maxTotalInstances`` and
``totalInstancesUsed``); at 2.36 the nova-network ones go, at 2.39 ``maxImageMeta``, at 2.57
those of file injection. ``?tenant_id=`` asks for another project's (admins).
"""

from __future__ import annotations

from typing import Any

import webob

from fleetcache.api import microversion, policy, util, validation
from fleetcache.api.handlers.quota_sets import checked_project_id
from fleetcache.api.policies import limits as policies
from fleetcache.api.quota import QuotaUsage
from fleetcache.api.schemas import quota_sets as schemas

V2_36 = microversion.Version(2, 36)
V2_39 = microversion.Version(2, 39)
V2_57 = microversion.Version(2, 57)
V2_75 = microversion.Version(2, 75)
#: Nova's ``ViewBuilder.limit_names``: quota -> its absolute limits' names.
LIMIT_NAMES = {
    "ram": ["maxTotalRAMSize"],
    "instances": ["maxTotalInstances"],
    "cores": ["maxTotalCores"],
    "key_pairs": ["maxTotalKeypairs"],
    "floating_ips": ["maxTotalFloatingIps"],
    "metadata_items": ["maxServerMeta", "maxImageMeta"],
    "injected_files": ["maxPersonality"],
    "injected_file_content_bytes": ["maxPersonalitySize"],
    "security_groups": ["maxSecurityGroups"],
    "security_group_rules": ["maxSecurityGroupRules"],
    "server_groups": ["maxServerGroups"],
    "server_group_members": ["maxServerGroupMembers"],
}
#: Nova's used limits: name -> quota.
USED_NAMES = {
    "totalRAMUsed": "ram",
    "totalCoresUsed": "cores",
    "totalInstancesUsed": "instances",
    "totalFloatingIpsUsed": "floating_ips",
    "totalSecurityGroupsUsed": "security_groups",
    "totalServerGroupsUsed": "server_groups",
}
FILTERED_V2_36 = ("floating_ips", "security_groups", "security_group_rules")
FILTERED_V2_57 = FILTERED_V2_36 + ("injected_files", "injected_file_content_bytes")


def absolute(quotas: dict[str, QuotaUsage], version: microversion.Version) -> dict[str, int]:
    """The ``absolute`` member of ``GET /limits`` at ``version``."""
    filtered = (FILTERED_V2_57 if version.matches(V2_57)
                else FILTERED_V2_36 if version.matches(V2_36) else ())
    shown: dict[str, int] = {}
    for name, quota in quotas.items():
        if name in filtered:
            continue
        for limit_name in LIMIT_NAMES.get(name, []):
            if limit_name != "maxImageMeta" or not version.matches(V2_39):
                shown[limit_name] = quota.limit
    for used_name, name in USED_NAMES.items():
        if name in quotas and name not in filtered:
            shown[used_name] = quotas[name].in_use
    return shown


def get_limits(req: webob.Request) -> webob.Response:
    """Show the project's absolute limits and usage (``?tenant_id``: another project's)."""
    state, context = util.get_state(req), util.get_context(req)
    policy.authorize(state.enforcer, context, policies.SHOW, {})
    version = microversion.request_version(req)
    validation.validate_query(
        req, schemas.LIMITS_QUERY_V2_75 if version.matches(V2_75) else schemas.LIMITS_QUERY)
    project_id = context.project_id
    if "tenant_id" in req.GET:
        policy.authorize(state.enforcer, context, policies.OTHER_PROJECT)
        project_id = checked_project_id(req.GET["tenant_id"])
    body: dict[str, Any] = {"rate": [],
                            "absolute": absolute(state.quota.project_quotas(project_id),
                                                 version)}
    return util.json_response({"limits": body})
