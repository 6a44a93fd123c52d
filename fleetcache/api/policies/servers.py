"""Policies of ``/servers`` (Nova's rule names and defaults: a project's members create,
rename, rebuild, stop, start and delete its servers, its readers see them; admins see the host
and may force one).
"""

from __future__ import annotations

from oslo_policy import policy

from fleetcache.api.policies import base

ROOT = "os_compute_api:servers:%s"
#: Shows ``OS-EXT-SRV-ATTR:host`` and ``hypervisor_hostname`` (Nova's rule).
EXTENDED_ATTRIBUTES = "os_compute_api:os-extended-server-attributes"
#: Lists every project's servers (``?all_tenants``).
ALL_PROJECTS = ROOT % "index:get_all_tenants"
SERVERS = "/servers"
SERVER = "/servers/{server_id}"


def _rule(name: str, check: str, description: str,
          operations: list[tuple[str, str]]) -> policy.DocumentedRuleDefault:
    return policy.DocumentedRuleDefault(
        name=name, check_str=check, description=description,
        operations=[{"method": m, "path": p} for m, p in operations],
        scope_types=base.PROJECT_SCOPE,
    )


rules: list[policy.RuleDefault] = [
    _rule(ROOT % "index", base.PROJECT_READER_OR_ADMIN, "List servers",
          [("GET", SERVERS)]),
    _rule(ROOT % "detail", base.PROJECT_READER_OR_ADMIN, "List servers with details",
          [("GET", SERVERS + "/detail")]),
    _rule(ALL_PROJECTS, base.ADMIN, "List the servers of every project",
          [("GET", SERVERS), ("GET", SERVERS + "/detail")]),
    _rule(ROOT % "show", base.PROJECT_READER_OR_ADMIN, "Show a server", [("GET", SERVER)]),
    _rule(ROOT % "create", base.PROJECT_MEMBER_OR_ADMIN, "Create a server",
          [("POST", SERVERS)]),
    _rule(ROOT % "create:forced_host", base.ADMIN,
          "Create a server on a given host (availability_zone zone:host)",
          [("POST", SERVERS)]),
    _rule(ROOT % "delete", base.PROJECT_MEMBER_OR_ADMIN, "Delete a server",
          [("DELETE", SERVER)]),
    _rule(ROOT % "rebuild", base.PROJECT_MEMBER_OR_ADMIN, "Rebuild a server from an image",
          [("POST", SERVER + "/action (rebuild)")]),
    _rule(ROOT % "update", base.PROJECT_MEMBER_OR_ADMIN, "Rename a server",
          [("PUT", SERVER)]),
    _rule(ROOT % "stop", base.PROJECT_MEMBER_OR_ADMIN, "Stop a server",
          [("POST", SERVER + "/action (os-stop)")]),
    _rule(ROOT % "start", base.PROJECT_MEMBER_OR_ADMIN, "Start a stopped server",
          [("POST", SERVER + "/action (os-start)")]),
    _rule(EXTENDED_ATTRIBUTES, base.ADMIN,
          "Show a server's host and hypervisor host name, and its fault details",
          [("GET", SERVER), ("GET", SERVERS + "/detail")]),
]


def list_rules() -> list[policy.RuleDefault]:
    return rules
