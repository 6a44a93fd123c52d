"""Policies of ``/os-aggregates/{id}/images``: pre-caching (Nova's rule) and its jobs."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

IMAGES = "compute:aggregates:images"
JOBS = "fleetcache:aggregates:images:jobs"

rules: list[policy.RuleDefault] = [
    policy.DocumentedRuleDefault(
        name=IMAGES,
        check_str=base.ADMIN,
        description="Request that images be pre-cached on the hosts of an aggregate",
        operations=[{"method": "POST", "path": "/os-aggregates/{aggregate_id}/images"}],
        scope_types=base.PROJECT_SCOPE,
    ),
    policy.DocumentedRuleDefault(
        name=JOBS,
        check_str=base.ADMIN,
        description="List the pre-cache jobs of an aggregate and show one with per-host results",
        operations=[
            {"method": "GET", "path": "/os-aggregates/{aggregate_id}/images/jobs"},
            {"method": "GET", "path": "/os-aggregates/{aggregate_id}/images/jobs/{job_id}"},
        ],
        scope_types=base.PROJECT_SCOPE,
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
