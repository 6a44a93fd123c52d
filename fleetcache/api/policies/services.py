"""Policies of ``/os-services`` (Nova's rule names)."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

LIST = "os_compute_api:os-services:list"

rules: list[policy.RuleDefault] = [
    policy.DocumentedRuleDefault(
        name=LIST,
        check_str=base.ADMIN,
        description="List all running services, with their state and zone",
        operations=[{"method": "GET", "path": "/os-services"}],
        scope_types=base.PROJECT_SCOPE,
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
