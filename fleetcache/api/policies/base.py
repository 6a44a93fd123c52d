"""Base rules the resource policies build on."""

from __future__ import annotations

from oslo_policy import policy

#: Nova's admin check: every aggregate write, pre-caching, jobs and services use it.
ADMIN = "rule:context_is_admin"
PROJECT_SCOPE = ["project"]
#: Nova's project personas (nova/policies/base.py): a member may change what its project
#: owns, a reader may look at it. Keystone's implied roles make every admin a member and
#: every member a reader; in noauth mode ``[api] noauth_default_roles`` gives all three.
PROJECT_MEMBER = "role:member and project_id:%(project_id)s"
PROJECT_READER = "role:reader and project_id:%(project_id)s"
PROJECT_MEMBER_OR_ADMIN = "rule:project_member_api or rule:context_is_admin"
PROJECT_READER_OR_ADMIN = "rule:project_reader_api or rule:context_is_admin"
#: Anyone with a token (Nova's ``RULE_ANY``).
ANY = "@"

rules = [
    policy.RuleDefault(
        "context_is_admin",
        "role:admin",
        description="Decides what is required for the 'is_admin:True' check to succeed.",
    ),
    policy.RuleDefault("project_member_api", PROJECT_MEMBER,
                       description="Default rule for Project level non admin APIs."),
    policy.RuleDefault("project_reader_api", PROJECT_READER,
                       description="Default rule for Project level read only APIs."),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
