"""Policies of ``/os-hypervisors`` (Nova's rule names and defaults: admins only)."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

LIST = "os_compute_api:os-hypervisors:list"
LIST_DETAIL = "os_compute_api:os-hypervisors:list-detail"

rules: list[policy.RuleDefault] = [
    policy.DocumentedRuleDefault(
        name=LIST,
        check_str=base.ADMIN,
        description="List the hypervisors (the compute hosts)",
        operations=[{"method": "GET", "path": "/os-hypervisors"}],
        scope_types=base.PROJECT_SCOPE,
    ),
    policy.DocumentedRuleDefault(
        name=LIST_DETAIL,
        check_str=base.ADMIN,
        description="List the hypervisors with their resources and service",
        operations=[{"method": "GET", "path": "/os-hypervisors/detail"}],
        scope_types=base.PROJECT_SCOPE,
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
