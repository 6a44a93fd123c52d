"""Policies of ``GET /limits`` (Nova's rule names and defaults: anyone reads its own
project's limits, admins another project's with ``?tenant_id``)."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

SHOW = "os_compute_api:limits"
OTHER_PROJECT = "os_compute_api:limits:other_project"

rules: list[policy.RuleDefault] = [
    policy.DocumentedRuleDefault(
        name=SHOW,
        check_str=base.ANY,
        description="Show rate and absolute limits for the current user project",
        operations=[{"method": "GET", "path": "/limits"}],
        scope_types=base.PROJECT_SCOPE,
    ),
    policy.DocumentedRuleDefault(
        name=OTHER_PROJECT,
        check_str=base.ADMIN,
        description="Show rate and absolute limits of another project (?tenant_id); "
        "checked after os_compute_api:limits",
        operations=[{"method": "GET", "path": "/limits"}],
        scope_types=base.PROJECT_SCOPE,
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
