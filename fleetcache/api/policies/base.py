"""Base rules and the check strings every resource policy builds on (Nova's new defaults).

Resource modules name one of these aliases rather than writing role checks themselves, so the
meaning of "admin" or "a reader of the target's project" is defined once, here:

- :data:`ADMIN`: global resources (aggregates, services, pre-caching, image look-ups).
- :data:`PROJECT_MEMBER_OR_ADMIN` / :data:`PROJECT_READER_OR_ADMIN`: project resources
  (writes / reads): the target's ``project_id`` must be the token's project, or the caller is
  an admin. The caller passes the owning project in the target (``policy.authorize``'s
  default target is the caller's own project, which suits creating a resource).
- :data:`PROJECT_MANAGER_OR_ADMIN`, :data:`SERVICE_OR_ADMIN`, :data:`ANY`, :data:`NOBODY`.

Keystone's ``bootstrap`` creates the roles ``admin``, ``member``, ``reader`` (and ``manager``,
``service``) with the implications admin -> member -> reader (-> manager between admin and member
on recent Keystones): a token lists the implied roles too, so ``role:reader`` also matches a
member's and an admin's token. Every rule is ``scope_types=["project"]``, as Nova's are: with
``[oslo_policy] enforce_scope`` a system-scoped or domain-scoped token is refused.
"""

from __future__ import annotations

from oslo_policy import policy

#: The only scope the compute API serves (Nova dropped system scope in 2023.1).
PROJECT_SCOPE = ["project"]

#: Nova's project personas (nova/policies/base.py): a member may change what its project
#: owns, a reader may look at it. Keystone's implied roles make every admin a member and
#: every member a reader; in noauth mode ``[api] noauth_default_roles`` gives all three.
ADMIN = "rule:context_is_admin"
PROJECT_MANAGER_OR_ADMIN = "rule:project_manager_or_admin"
PROJECT_MEMBER_OR_ADMIN = "rule:project_member_or_admin"
PROJECT_READER_OR_ADMIN = "rule:project_reader_or_admin"
SERVICE_OR_ADMIN = "rule:service_or_admin"
#: Any authenticated caller (Nova's ``RULE_ANY``).
ANY = "@"
#: Nobody (a rule an operator must open explicitly).
NOBODY = "!"

rules: list[policy.RuleDefault] = [
    policy.RuleDefault(
        "context_is_admin",
        "role:admin",
        description="Decides what is required for the 'is_admin:True' check to succeed.",
    ),
    policy.RuleDefault(
        "project_manager_api",
        "role:manager and project_id:%(project_id)s",
        description="A manager of the target's project.",
    ),
    policy.RuleDefault(
        "project_member_api",
        "role:member and project_id:%(project_id)s",
        description="A member of the target's project.",
    ),
    policy.RuleDefault(
        "project_reader_api",
        "role:reader and project_id:%(project_id)s",
        description="A reader of the target's project.",
    ),
    policy.RuleDefault(
        "service_api",
        "role:service",
        description="Another OpenStack service, with Keystone's 'service' role.",
    ),
    policy.RuleDefault(
        "project_manager_or_admin",
        "rule:project_manager_api or rule:context_is_admin",
        description="Project-level management APIs: a manager of the project, or an admin.",
    ),
    policy.RuleDefault(
        "project_member_or_admin",
        "rule:project_member_api or rule:context_is_admin",
        description="Writes to project resources: a member of the project, or an admin.",
    ),
    policy.RuleDefault(
        "project_reader_or_admin",
        "rule:project_reader_api or rule:context_is_admin",
        description="Reads of project resources: a reader of the project, or an admin.",
    ),
    policy.RuleDefault(
        "service_or_admin",
        "rule:service_api or rule:context_is_admin",
        description="Service-to-service APIs: a service user, or an admin.",
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
