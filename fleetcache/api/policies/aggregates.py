"""Policies of ``/os-aggregates`` (Nova's rule names)."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

POLICY_ROOT = "os_compute_api:os-aggregates:%s"
BASE_PATH = "/os-aggregates"
ITEM_PATH = "/os-aggregates/{aggregate_id}"
ACTION_PATH = "/os-aggregates/{aggregate_id}/action"


def _rule(action: str, description: str, method: str, path: str) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name=POLICY_ROOT % action,
        check_str=base.ADMIN,
        description=description,
        operations=[{"method": method, "path": path}],
        scope_types=base.PROJECT_SCOPE,
    )


rules: list[policy.RuleDefault] = [
    _rule("index", "List all aggregates", "GET", BASE_PATH),
    _rule("create", "Create an aggregate", "POST", BASE_PATH),
    _rule("show", "Show details for an aggregate", "GET", ITEM_PATH),
    _rule("update", "Update name and/or availability zone of an aggregate", "PUT", ITEM_PATH),
    _rule("delete", "Delete an aggregate", "DELETE", ITEM_PATH),
    _rule("add_host", "Add a host to an aggregate", "POST", ACTION_PATH + " (add_host)"),
    _rule("remove_host", "Remove a host from an aggregate", "POST", ACTION_PATH + " (remove_host)"),
    _rule(
        "set_metadata", "Create or replace metadata for an aggregate", "POST",
        ACTION_PATH + " (set_metadata)",
    ),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
