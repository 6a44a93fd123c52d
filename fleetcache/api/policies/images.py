"""Policy of the image look-ups (``/images``, ``/v2/images``): a fleetcache addition."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

SHOW = "fleetcache:images:show"

rules: list[policy.RuleDefault] = [
    policy.DocumentedRuleDefault(
        name=SHOW,
        check_str=base.ADMIN,
        description="Look images up by id through the configured image source",
        operations=[
            {"method": "GET", "path": "/images/{image_id}"},
            {"method": "GET", "path": "/images"},
            {"method": "GET", "path": "/v2/images"},
        ],
        scope_types=base.PROJECT_SCOPE,
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
