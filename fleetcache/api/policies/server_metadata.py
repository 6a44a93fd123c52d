"""Policies of ``/servers/{id}/metadata`` (Nova's rule names and defaults: a project's readers
read its servers' metadata, its members change it)."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

ROOT = "os_compute_api:server-metadata:%s"
METADATA = "/servers/{server_id}/metadata"
ITEM = METADATA + "/{key}"


def _rule(action: str, check: str, description: str,
          operations: list[tuple[str, str]]) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name=ROOT % action, check_str=check, description=description,
        operations=[{"method": m, "path": p} for m, p in operations],
        scope_types=base.PROJECT_SCOPE,
    )


rules: list[policy.RuleDefault] = [
    _rule("index", base.PROJECT_READER_OR_ADMIN, "List a server's metadata",
          [("GET", METADATA)]),
    _rule("show", base.PROJECT_READER_OR_ADMIN, "Show one key of a server's metadata",
          [("GET", ITEM)]),
    _rule("create", base.PROJECT_MEMBER_OR_ADMIN, "Add or change keys of a server's metadata",
          [("POST", METADATA)]),
    _rule("update_all", base.PROJECT_MEMBER_OR_ADMIN, "Replace a server's metadata",
          [("PUT", METADATA)]),
    _rule("update", base.PROJECT_MEMBER_OR_ADMIN, "Set one key of a server's metadata",
          [("PUT", ITEM)]),
    _rule("delete", base.PROJECT_MEMBER_OR_ADMIN, "Delete one key of a server's metadata",
          [("DELETE", ITEM)]),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
