"""Policies of flavor access (Nova's rule names and defaults, nova/policies/flavor_access.py:
admins list, grant and revoke a private flavor's projects)."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

LIST = "os_compute_api:os-flavor-access"
ROOT = "os_compute_api:os-flavor-access:%s"
#: Each action of ``POST /flavors/{flavor_id}/action``, by the body's key.
ACTION_RULES = {"addTenantAccess": ROOT % "add_tenant_access",
                "removeTenantAccess": ROOT % "remove_tenant_access"}

rules: list[policy.RuleDefault] = [
    policy.DocumentedRuleDefault(
        name=ACTION_RULES["addTenantAccess"], check_str=base.ADMIN,
        description="Share a private flavor with a project",
        operations=[{"method": "POST", "path": "/flavors/{flavor_id}/action (addTenantAccess)"}],
        scope_types=base.PROJECT_SCOPE),
    policy.DocumentedRuleDefault(
        name=ACTION_RULES["removeTenantAccess"], check_str=base.ADMIN,
        description="Stop sharing a private flavor with a project",
        operations=[{"method": "POST",
                     "path": "/flavors/{flavor_id}/action (removeTenantAccess)"}],
        scope_types=base.PROJECT_SCOPE),
    policy.DocumentedRuleDefault(
        name=LIST, check_str=base.ADMIN,
        description="List the projects a private flavor is shared with",
        operations=[{"method": "GET", "path": "/flavors/{flavor_id}/os-flavor-access"}],
        scope_types=base.PROJECT_SCOPE),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
