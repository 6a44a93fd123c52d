"""Policy of the status page (``/status``) and its progress feed: a fleetcache addition."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

SHOW = "fleetcache:status:show"

rules: list[policy.RuleDefault] = [
    policy.DocumentedRuleDefault(
        name=SHOW,
        check_str=base.ADMIN,
        description="Show the status page: jobs, hosts x images results, cache usage per host, "
        "and the progress feed its script polls",
        operations=[
            {"method": "GET", "path": "/status"},
            {"method": "GET", "path": "/status/progress"},
        ],
        scope_types=base.PROJECT_SCOPE,
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
