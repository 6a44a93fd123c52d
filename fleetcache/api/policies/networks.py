"""Policy of the pseudo-network look-ups (a fleetcache addition: see handlers/networks.py)."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

SHOW = "fleetcache:networks:show"

rules: list[policy.RuleDefault] = [
    policy.DocumentedRuleDefault(
        name=SHOW,
        check_str=base.ANY,
        description="Look up the pseudo-network 'none' (what --network none asks for)",
        operations=[{"method": "GET", "path": "/networks/{network_id}"},
                    {"method": "GET", "path": "/networks"}],
        scope_types=base.PROJECT_SCOPE,
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
