"""Base rules the resource policies build on."""

from __future__ import annotations

from oslo_policy import policy

#: Nova's admin check: every aggregate write, pre-caching, jobs and services use it.
ADMIN = "rule:context_is_admin"
PROJECT_SCOPE = ["project"]

rules = [
    policy.RuleDefault(
        "context_is_admin",
        "role:admin",
        description="Decides what is required for the 'is_admin:True' check to succeed.",
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
