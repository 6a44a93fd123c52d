"""Policy of ``/os-hosts/{host}/image-cache``: a fleetcache addition."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

LIST = "fleetcache:os-hosts:image-cache:list"

rules: list[policy.RuleDefault] = [
    policy.DocumentedRuleDefault(
        name=LIST,
        check_str=base.ADMIN,
        description="List the images a compute host reported in its image cache, with sizes, "
        "last use and the cache's disk usage",
        operations=[{"method": "GET", "path": "/os-hosts/{host}/image-cache"}],
        scope_types=base.PROJECT_SCOPE,
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
