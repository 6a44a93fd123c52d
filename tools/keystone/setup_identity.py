"""Fill the local stack's fresh Keystone: projects, users, role assignments and the catalog.

Run by ``tools/stack.sh up`` after ``keystone-manage bootstrap`` (which made the admin user,
the ``admin`` project, the roles and the identity endpoints), with a JSON spec on standard input
(never in argv, where ``ps`` would show the passwords)::

    {"auth_url": "http://127.0.0.1:15000/v3", "admin_password": "...", "region": "RegionOne",
     "projects": ["demo", "service"],
     "users": [{"name": "member", "password": "...", "project": "demo", "roles": ["member"]}],
     "services": [{"type": "compute", "name": "fleetcache", "url": "http://..."}]}

Each service gets a ``public`` and an ``internal`` endpoint with the same URL. It talks to
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

    def __init__(self, auth_url: str, admin_password: str) -> None:
        auth = v3.Password(auth_url=auth_url, username="admin", password=admin_password,
                           project_name="admin", user_domain_id="default",
                           project_domain_id="default")
        self.session = ks_session.Session(auth=auth, timeout=30)
        self.url = auth_url.rstrip("/")

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        resp = self.session.request(self.url + path, method, json=body, raise_exc=True)
        return resp.json() if resp.content else None

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
