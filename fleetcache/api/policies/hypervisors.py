"""Policies of ``/os-hypervisors`` (Nova's rule names and defaults: admins only)."""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

PREFIX = "os_compute_api:os-hypervisors:%s"
LIST = PREFIX % "list"
LIST_DETAIL = PREFIX % "list-detail"
SHOW = PREFIX % "show"
STATISTICS = PREFIX % "statistics"
UPTIME = PREFIX % "uptime"
SEARCH = PREFIX % "search"
SERVERS = PREFIX % "servers"


def _rule(name: str, description: str, method: str, path: str) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name=name, check_str=base.ADMIN, description=description,
        operations=[{"method": method, "path": path}], scope_types=base.PROJECT_SCOPE)


rules: list[policy.RuleDefault] = [
    _rule(LIST, "List the hypervisors (the compute hosts)", "GET", "/os-hypervisors"),
    _rule(LIST_DETAIL, "List the hypervisors with their resources and service", "GET",
          "/os-hypervisors/detail"),
    _rule(SHOW, "Show a hypervisor with its resources and service", "GET",
          "/os-hypervisors/{hypervisor_id}"),
    _rule(STATISTICS, "Show the resources of the enabled hypervisors added up", "GET",
          "/os-hypervisors/statistics"),
    _rule(UPTIME, "Show a hypervisor's uptime (asked of the compute)", "GET",
          "/os-hypervisors/{hypervisor_id}/uptime"),
    _rule(SEARCH, "Search the hypervisors by host name (below 2.53)", "GET",
          "/os-hypervisors/{hypervisor_hostname_pattern}/search"),
    _rule(SERVERS, "List the servers of the hypervisors found by host name (below 2.53)",
          "GET", "/os-hypervisors/{hypervisor_hostname_pattern}/servers"),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
