"""Policies of ``/os-quota-sets`` (Nova's rule names and defaults: a project's readers see
its quotas, anyone the defaults, admins every project's and the updates, which change
nothing with unified limits)."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

ROOT = "os_compute_api:os-quota-sets:%s"
QUOTA_SET = "/os-quota-sets/{tenant_id}"


def _rule(action: str, check: str, description: str, method: str,
          path: str) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name=ROOT % action, check_str=check, description=description,
        operations=[{"method": method, "path": path}], scope_types=base.PROJECT_SCOPE)


rules: list[policy.RuleDefault] = [
    _rule("update", base.ADMIN, "Update the quotas", "PUT", QUOTA_SET),
    _rule("defaults", base.ANY, "List default quotas", "GET", QUOTA_SET + "/defaults"),
    _rule("show", base.PROJECT_READER_OR_ADMIN, "Show a quota", "GET", QUOTA_SET),
    _rule("delete", base.ADMIN, "Revert quotas to defaults", "DELETE", QUOTA_SET),
    _rule("detail", base.PROJECT_READER_OR_ADMIN, "Show the detail of quota", "GET",
          QUOTA_SET + "/detail"),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
