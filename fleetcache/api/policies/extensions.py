"""Policy of ``/extensions`` (Nova's rule name and default: anyone)."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

LIST = "os_compute_api:extensions"

rules: list[policy.RuleDefault] = [
    policy.DocumentedRuleDefault(
        name=LIST,
        check_str=base.ANY,
        description="List the API extensions (none: microversions replaced them)",
        operations=[{"method": "GET", "path": "/extensions"}],
        scope_types=base.PROJECT_SCOPE,
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
