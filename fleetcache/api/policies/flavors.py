"""Policies of ``/flavors`` and their extra specs (Nova's rule names and defaults: anyone
lists and shows flavors, admins create, update and delete them)."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

MANAGE_ROOT = "os_compute_api:os-flavor-manage:%s"
SPECS_ROOT = "os_compute_api:os-flavor-extra-specs:%s"
#: Not Nova's (it has no rule for listing flavors): fleetcache keeps every route under one.
LIST = "fleetcache:flavors:list"
FLAVORS = "/flavors"
FLAVOR = "/flavors/{flavor_id}"
SPECS = "/flavors/{flavor_id}/os-extra_specs"
SPEC = "/flavors/{flavor_id}/os-extra_specs/{flavor_extra_spec_key}"


def _rule(name: str, check: str, description: str,
          operations: list[tuple[str, str]]) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name=name, check_str=check, description=description,
        operations=[{"method": m, "path": p} for m, p in operations],
        scope_types=base.PROJECT_SCOPE,
    )


rules: list[policy.RuleDefault] = [
    _rule(LIST, base.ANY, "List and show flavors",
          [("GET", FLAVORS), ("GET", FLAVORS + "/detail"), ("GET", FLAVOR)]),
    _rule(MANAGE_ROOT % "create", base.ADMIN, "Create a flavor", [("POST", FLAVORS)]),
    _rule(MANAGE_ROOT % "update", base.ADMIN, "Update a flavor's description",
          [("PUT", FLAVOR)]),
    _rule(MANAGE_ROOT % "delete", base.ADMIN, "Delete a flavor", [("DELETE", FLAVOR)]),
    _rule(SPECS_ROOT % "index", base.PROJECT_READER_OR_ADMIN, "List a flavor's extra specs",
          [("GET", SPECS)]),
    _rule(SPECS_ROOT % "show", base.PROJECT_READER_OR_ADMIN, "Show one extra spec",
          [("GET", SPEC)]),
    _rule(SPECS_ROOT % "create", base.ADMIN, "Create or replace extra specs",
          [("POST", SPECS)]),
    _rule(SPECS_ROOT % "update", base.ADMIN, "Update one extra spec", [("PUT", SPEC)]),
    _rule(SPECS_ROOT % "delete", base.ADMIN, "Delete one extra spec", [("DELETE", SPEC)]),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
