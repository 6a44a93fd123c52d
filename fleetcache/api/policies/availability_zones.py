"""Policies of ``/os-availability-zone`` (Nova's rule names and defaults: anyone lists the
zones, admins see their hosts and services)."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

LIST = "os_compute_api:os-availability-zone:list"
DETAIL = "os_compute_api:os-availability-zone:detail"

rules: list[policy.RuleDefault] = [
    policy.DocumentedRuleDefault(
        name=LIST,
        check_str=base.ANY,
        description="List the availability zones and whether each is available",
        operations=[{"method": "GET", "path": "/os-availability-zone"}],
        scope_types=base.PROJECT_SCOPE,
    ),
    policy.DocumentedRuleDefault(
        name=DETAIL,
        check_str=base.ADMIN,
        description="List the availability zones with their hosts and services",
        operations=[{"method": "GET", "path": "/os-availability-zone/detail"}],
        scope_types=base.PROJECT_SCOPE,
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
