"""Fill the local stack's fresh Keystone: projects, users, role assignments and the catalog.

Run by ``tools/stack.sh up`` after ``keystone-manage bootstrap`` (which made the admin user,
the ``admin`` project, the roles and the identity endpoints), with a JSON spec on standard input
(never in argv, where ``ps`` would show the passwords)::

    {"auth_url": "http://127.0.0.1:15000/v3", "admin_password": "...", "region": "RegionOne",
     "projects": ["demo", "service"],
     "users": [{"name": "member", "password": "...", "project": "demo", "roles": ["member"]}],
     "services": [{"type": "compute", "name": "fleetcache", "url": "http://..."}],
     "limits": {"service": "compute", "registered": {"servers": 10, ...},
                "projects": {"demo": {"servers": -1, ...}}}}

Each service gets a ``public`` and an ``internal`` endpoint with the same URL. ``limits`` are
Keystone unified limits of the service of that type in the region: ``registered`` ones (every
project's defaults) and ``projects``' own (-1: unlimited); they are set idempotently (created
when missing, changed when different), as the bootstrap admin with a system-scoped token, the
scope Keystone's policy asks of limit writes. It talks to
Keystone's REST API through a keystoneauth session (no client library needed beyond
keystoneauth1, which fleetcache already depends on) and prints nothing but failures.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

INTERFACES = ("public", "internal")


class Identity:
    """The few Keystone v3 calls the stack needs, as the bootstrap admin."""

    def __init__(self, auth_url: str, admin_password: str, system: bool = False) -> None:
        scope: dict[str, Any] = ({"system_scope": "all"} if system else
                                 {"project_name": "admin", "project_domain_id": "default"})
        auth = v3.Password(auth_url=auth_url, username="admin", password=admin_password,
                           user_domain_id="default", **scope)
        self.session = ks_session.Session(auth=auth, timeout=30)
        self.url = auth_url.rstrip("/")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        resp = self.session.request(self.url + path, method, json=body, raise_exc=True)
        return resp.json() if resp.content else None

    def get(self, path: str) -> Any:
        return self._call("GET", path)

    def patch(self, path: str, body: dict[str, Any]) -> None:
        self._call("PATCH", path, body)

    def post(self, path: str, body: dict[str, Any]) -> None:
        self._call("POST", path, body)

    def ids(self, collection: str) -> dict[str, str]:
        """name -> id of every ``/v3/<collection>`` entry."""
        return {item["name"]: item["id"] for item in self._call("GET", f"/{collection}")[
            collection]}

    def create(self, collection: str, member: str, body: dict[str, Any]) -> str:
        return str(self._call("POST", f"/{collection}", {member: body})[member]["id"])

    def grant(self, project_id: str, user_id: str, role_id: str) -> None:
        self._call("PUT", f"/projects/{project_id}/users/{user_id}/roles/{role_id}")


def main() -> int:
    spec = json.load(sys.stdin)
    keystone = Identity(spec["auth_url"], spec["admin_password"])
    roles = keystone.ids("roles")
    for role in {r for user in spec["users"] for r in user["roles"]} - set(roles):
        roles[role] = keystone.create("roles", "role", {"name": role})
    projects = keystone.ids("projects")
    for name in spec["projects"]:
        if name not in projects:
            projects[name] = keystone.create(
                "projects", "project", {"name": name, "domain_id": "default"})
    for user in spec["users"]:
        user_id = keystone.create("users", "user", {
            "name": user["name"], "password": user["password"], "domain_id": "default",
            "default_project_id": projects[user["project"]]})
        for role in user["roles"]:
            keystone.grant(projects[user["project"]], user_id, roles[role])
    for service in spec["services"]:
        service_id = keystone.create("services", "service",
                                     {"type": service["type"], "name": service["name"]})
        for interface in INTERFACES:
            keystone.create("endpoints", "endpoint", {
                "service_id": service_id, "interface": interface, "url": service["url"],
                "region_id": spec["region"]})
    if "limits" in spec:
        set_limits(Identity(spec["auth_url"], spec["admin_password"], system=True),
                   spec["limits"], spec["region"], projects)
    return 0


def set_limits(keystone: Identity, limits: dict[str, Any], region: str,
               projects: dict[str, str]) -> None:
    """The registered limits and project limits of ``limits`` (see the module docstring)."""
    services = keystone.get(f"/services?type={limits['service']}")["services"]
    if len(services) != 1:
        raise SystemExit(f"setup_identity: {len(services)} services of type "
                         f"{limits['service']}, want one")
    where = {"service_id": services[0]["id"], "region_id": region}
    query = f"service_id={where['service_id']}&region_id={region}"
    existing = {r["resource_name"]: r for r in
                keystone.get(f"/registered_limits?{query}")["registered_limits"]}
    for name, value in limits["registered"].items():
        if name not in existing:
            keystone.post("/registered_limits", {"registered_limits": [
                {**where, "resource_name": name, "default_limit": value}]})
        elif existing[name]["default_limit"] != value:
            keystone.patch(f"/registered_limits/{existing[name]['id']}",
                           {"registered_limit": {"default_limit": value}})
    for project, values in limits.get("projects", {}).items():
        project_id = projects[project]
        own = {r["resource_name"]: r for r in keystone.get(
            f"/limits?{query}&project_id={project_id}")["limits"]}
        for name, value in values.items():
            if name not in own:
                keystone.post("/limits", {"limits": [
                    {**where, "project_id": project_id, "resource_name": name,
                     "resource_limit": value}]})
            elif own[name]["resource_limit"] != value:
                keystone.patch(f"/limits/{own[name]['id']}", {"limit": {"resource_limit": value}})


if __name__ == "__main__":
    sys.exit(main())
