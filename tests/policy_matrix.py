"""The route x role matrix of the API's default policies, shared by the functional test (noauth
headers, in process) and the integration test (real Keystone tokens, raw HTTP).

A run creates, as the admin, an aggregate the probes work on (``{agg}``), a second one only
the ``DELETE`` probe removes (``{victim}``), a pre-cache job (``{job}``), a flavor with one
extra spec (``{flavor}``, :data:`SPEC`), a flavor only the ``DELETE`` probe removes
(``{flavor_victim}``) and a private flavor the flavor access probes share with the member's
project (``{private_flavor}``, ``{project}``); ``{hypervisor}`` is the uuid of ``{host}``'s
compute; as the project member, a server (``{server}``) and one server per role
for the ``DELETE`` probe (``{server_victim}``: a mapping role -> id). Then every role sends
every probe, the admin last (its writes would change what the others see). Each probe names
the route as ``docs/api.md`` does and the policy rule that guards it.

Expected, as Nova ships its policies: the admin is authorized everywhere; a project member or
reader (of this or another project) gets 403 with a ``forbidden`` fault naming the rule on the
admin-only routes; anyone lists flavors and networks; a project's reader reads its servers, its
member also creates, rebuilds and deletes them, and another project's user gets 404 for them
(Nova does not reveal that they exist); a request without a valid token gets 401 (keystone
mode only). "Authorized" means the policy let the request through: a probe may then get a 4xx
of the handler (the ``POST /servers`` and ``rebuild`` probes send an empty body on purpose, so
that the matrix boots nothing: 400 after the policy check).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

#: (status, body or None): what one probe got.
Answer = tuple[int, Any]
#: sends (role, method, path, body, microversion) -> answer; role None: no token at all.
Send = Callable[[str | None, str, str, Any, str | None], Answer]

PUBLIC = "(none)"


ADMIN_ONLY = ("admin",)
EVERYONE = ("reader", "member", "other", "admin")
#: The member's project (``reader``, ``member``) and the admin.
PROJECT_READERS = ("reader", "member", "admin")
PROJECT_MEMBERS = ("member", "admin")


@dataclasses.dataclass(frozen=True)
class Probe:
    method: str
    #: Under the API root; ``{agg}``, ``{victim}``, ``{job}``, ``{image}``, ``{host}``,
    #: ``{hypervisor}``, ``{flavor}``, ``{flavor_victim}``, ``{private_flavor}``,
    #: ``{server}``, ``{server_victim}``, ``{project}`` (the reader's and member's project);
    #: ``{spec}`` is :data:`SPEC`, ``{meta_key}`` :data:`META_KEY` and ``{network}`` the
    #: pseudo-network ``none``.
    path: str
    rule: str
    body: dict[str, Any] | None = None
    microversion: str | None = None
    #: The roles the policy lets through; the others get 403 (or 404, see ``hidden``).
    allowed: tuple[str, ...] = ADMIN_ONLY
    #: The roles that get 404 instead of 403: another project's server is not revealed.
    hidden: tuple[str, ...] = ()

    @property
    def route(self) -> str:
        label = self.path.split("?")[0]
        if self.body and self.path.endswith("/action"):
            label += f" ({next(iter(self.body))})"
        return f"{self.method} {label}"

    def fill(self, ids: dict[str, Any]) -> tuple[str, Any]:
        """The concrete path and body for the run's ids (a mapping value: one id per role)."""
        role = ids["role"]
        flat = {"spec": SPEC, "network": "none", "meta_key": META_KEY,
                **{k: v[role] if isinstance(v, dict) else v for k, v in ids.items()}}
        return self.path.format(**flat), _filled(self.body, flat)


def _filled(value: Any, ids: dict[str, Any]) -> Any:
    """``value`` with ``{name}`` placeholders in its strings replaced."""
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, dict):
        return {key: _filled(item, ids) for key, item in value.items()}
    if isinstance(value, list):
        return [_filled(item, ids) for item in value]
    return value


AGG = "/v2.1/os-aggregates"
FLAVORS = "/v2.1/flavors"
SERVERS = "/v2.1/servers"
QUOTA_SET = "/v2.1/os-quota-sets/{project}"
QUOTA_RULE = "os_compute_api:os-quota-sets:%s"
SPEC_RULE = "os_compute_api:os-flavor-extra-specs:%s"
HYPERVISORS = "/v2.1/os-hypervisors"
HYPERVISOR_RULE = "os_compute_api:os-hypervisors:%s"
ACCESS_RULE = "os_compute_api:os-flavor-access"
#: The extra spec the run sets on ``{flavor}`` before the probes.
SPEC = "matrix:spec"
#: The metadata key the servers of the matrix are created with (``{meta_key}``).
META_KEY = "matrix"
#: The member's servers' metadata at create (so that showing ``{meta_key}`` finds it).
SERVER_METADATA = {META_KEY: "created"}
META_RULE = "os_compute_api:server-metadata:%s"
PROBES: list[Probe] = [
    Probe("GET", "/", PUBLIC),
    Probe("GET", "/v2", PUBLIC),
    Probe("GET", "/v2.1", PUBLIC),
    Probe("GET", "/openapi.json", PUBLIC),
    Probe("GET", AGG, "os_compute_api:os-aggregates:index"),
    Probe("POST", AGG, "os_compute_api:os-aggregates:create",
          {"aggregate": {"name": "{prefix}-new-{role}"}}),
    Probe("GET", AGG + "/{agg}", "os_compute_api:os-aggregates:show"),
    Probe("PUT", AGG + "/{agg}", "os_compute_api:os-aggregates:update",
          {"aggregate": {"availability_zone": "matrix-az"}}),
    Probe("POST", AGG + "/{agg}/action", "os_compute_api:os-aggregates:set_metadata",
          {"set_metadata": {"metadata": {"matrix": "{role}"}}}),
    Probe("POST", AGG + "/{agg}/images", "compute:aggregates:images",
          {"cache": [{"id": "{image}"}]}, "2.81"),
    Probe("GET", AGG + "/{agg}/images/jobs", "fleetcache:aggregates:images:jobs",
          microversion="2.81"),
    Probe("GET", AGG + "/{agg}/images/jobs/{job}", "fleetcache:aggregates:images:jobs",
          microversion="2.81"),
    Probe("POST", AGG + "/{agg}/action", "os_compute_api:os-aggregates:add_host",
          {"add_host": {"host": "{host}"}}),
    Probe("POST", AGG + "/{agg}/action", "os_compute_api:os-aggregates:remove_host",
          {"remove_host": {"host": "{host}"}}),
    Probe("GET", "/v2.1/os-services", "os_compute_api:os-services:list"),
    Probe("GET", HYPERVISORS, HYPERVISOR_RULE % "list"),
    Probe("GET", HYPERVISORS + "/detail", HYPERVISOR_RULE % "list-detail"),
    Probe("GET", HYPERVISORS + "/statistics", HYPERVISOR_RULE % "statistics"),
    Probe("GET", HYPERVISORS + "/{hypervisor}", HYPERVISOR_RULE % "show",
          microversion="2.81"),
    Probe("GET", HYPERVISORS + "/{hypervisor}/uptime", HYPERVISOR_RULE % "uptime",
          microversion="2.81"),
    Probe("GET", HYPERVISORS + "/{host}/search", HYPERVISOR_RULE % "search"),
    Probe("GET", HYPERVISORS + "/{host}/servers", HYPERVISOR_RULE % "servers"),
    Probe("GET", "/v2.1/os-availability-zone", "os_compute_api:os-availability-zone:list",
          allowed=EVERYONE),
    Probe("GET", "/v2.1/os-availability-zone/detail",
          "os_compute_api:os-availability-zone:detail"),
    Probe("GET", "/v2.1/extensions", "os_compute_api:extensions", allowed=EVERYONE),
    Probe("GET", "/v2.1/extensions/{prefix}", "os_compute_api:extensions", allowed=EVERYONE),
    Probe("GET", "/v2.1/os-hosts/{host}/image-cache", "fleetcache:os-hosts:image-cache:list",
          microversion="2.81"),
    Probe("GET", "/v2.1/images/{image}", "fleetcache:images:show"),
    Probe("GET", "/v2.1/images?id={image}", "fleetcache:images:show"),
    Probe("GET", "/v2.1/v2/images?id=in:{image}", "fleetcache:images:show"),
    Probe("GET", "/status", "fleetcache:status:show"),
    Probe("GET", "/status/progress", "fleetcache:status:show"),
    Probe("DELETE", AGG + "/{victim}", "os_compute_api:os-aggregates:delete"),
    Probe("GET", FLAVORS, "fleetcache:flavors:list", allowed=EVERYONE),
    Probe("GET", FLAVORS + "/detail", "fleetcache:flavors:list", allowed=EVERYONE),
    Probe("GET", FLAVORS + "/{flavor}", "fleetcache:flavors:list", allowed=EVERYONE),
    Probe("POST", FLAVORS, "os_compute_api:os-flavor-manage:create",
          {"flavor": {"name": "{prefix}-new-{role}", "ram": 64, "vcpus": 1, "disk": 1}}),
    Probe("PUT", FLAVORS + "/{flavor}", "os_compute_api:os-flavor-manage:update",
          {"flavor": {"description": "matrix {role}"}}, "2.81"),
    Probe("GET", FLAVORS + "/{flavor}/os-extra_specs", SPEC_RULE % "index", allowed=EVERYONE),
    Probe("POST", FLAVORS + "/{flavor}/os-extra_specs", SPEC_RULE % "create",
          {"extra_specs": {"matrix:created": "{role}"}}),
    Probe("GET", FLAVORS + "/{flavor}/os-extra_specs/{spec}", SPEC_RULE % "show",
          allowed=EVERYONE),
    Probe("PUT", FLAVORS + "/{flavor}/os-extra_specs/{spec}", SPEC_RULE % "update",
          {SPEC: "{role}"}),
    Probe("DELETE", FLAVORS + "/{flavor}/os-extra_specs/{spec}", SPEC_RULE % "delete"),
    Probe("GET", FLAVORS + "/{private_flavor}/os-flavor-access", ACCESS_RULE),
    Probe("POST", FLAVORS + "/{private_flavor}/action", ACCESS_RULE + ":add_tenant_access",
          {"addTenantAccess": {"tenant": "{project}"}}),
    Probe("POST", FLAVORS + "/{private_flavor}/action", ACCESS_RULE + ":remove_tenant_access",
          {"removeTenantAccess": {"tenant": "{project}"}}),
    Probe("DELETE", FLAVORS + "/{flavor_victim}", "os_compute_api:os-flavor-manage:delete"),
    Probe("GET", "/v2.1/networks", "fleetcache:networks:show", allowed=EVERYONE),
    Probe("GET", "/v2.1/networks/{network}", "fleetcache:networks:show", allowed=EVERYONE),
    Probe("GET", SERVERS, "os_compute_api:servers:index", allowed=EVERYONE),
    Probe("GET", SERVERS + "/detail", "os_compute_api:servers:detail", allowed=EVERYONE),
    Probe("POST", SERVERS, "os_compute_api:servers:create", {"server": {}}, "2.81",
          allowed=("member", "other", "admin")),
    Probe("GET", SERVERS + "/{server}", "os_compute_api:servers:show",
          allowed=PROJECT_READERS, hidden=("other",)),
    Probe("POST", SERVERS + "/{server}/action", "os_compute_api:servers:rebuild",
          {"rebuild": {}}, "2.81", allowed=PROJECT_MEMBERS, hidden=("other",)),
    Probe("PUT", SERVERS + "/{server}", "os_compute_api:servers:update",
          {"server": {"name": "matrix-{role}"}}, "2.81", allowed=PROJECT_MEMBERS,
          hidden=("other",)),
    Probe("POST", SERVERS + "/{server}/action", "os_compute_api:servers:stop",
          {"os-stop": None}, "2.81", allowed=PROJECT_MEMBERS, hidden=("other",)),
    Probe("POST", SERVERS + "/{server}/action", "os_compute_api:servers:start",
          {"os-start": None}, "2.81", allowed=PROJECT_MEMBERS, hidden=("other",)),
    # By now os-stop and os-start have taken the server from ERROR (its build found no host)
    # to ACTIVE, where its metadata may change.
    Probe("GET", SERVERS + "/{server}/metadata", META_RULE % "index",
          allowed=PROJECT_READERS, hidden=("other",)),
    Probe("POST", SERVERS + "/{server}/metadata", META_RULE % "create",
          {"metadata": {META_KEY: "{role}"}}, allowed=PROJECT_MEMBERS, hidden=("other",)),
    Probe("PUT", SERVERS + "/{server}/metadata", META_RULE % "update_all",
          {"metadata": {META_KEY: "{role}"}}, allowed=PROJECT_MEMBERS, hidden=("other",)),
    Probe("GET", SERVERS + "/{server}/metadata/{meta_key}", META_RULE % "show",
          allowed=PROJECT_READERS, hidden=("other",)),
    Probe("PUT", SERVERS + "/{server}/metadata/{meta_key}", META_RULE % "update",
          {"meta": {META_KEY: "{role}"}}, allowed=PROJECT_MEMBERS, hidden=("other",)),
    Probe("DELETE", SERVERS + "/{server}/metadata/{meta_key}", META_RULE % "delete",
          allowed=PROJECT_MEMBERS, hidden=("other",)),
    Probe("DELETE", SERVERS + "/{server_victim}", "os_compute_api:servers:delete",
          allowed=PROJECT_MEMBERS, hidden=("other",)),
    Probe("GET", "/v2.1/limits", "os_compute_api:limits", allowed=EVERYONE),
    Probe("GET", "/v2.1/limits?tenant_id={project}", "os_compute_api:limits:other_project"),
    Probe("GET", QUOTA_SET, QUOTA_RULE % "show", allowed=PROJECT_READERS),
    Probe("GET", QUOTA_SET + "/defaults", QUOTA_RULE % "defaults", allowed=EVERYONE),
    Probe("GET", QUOTA_SET + "/detail", QUOTA_RULE % "detail", allowed=PROJECT_READERS),
    Probe("PUT", QUOTA_SET, QUOTA_RULE % "update", {"quota_set": {"instances": 10}}),
    Probe("DELETE", QUOTA_SET, QUOTA_RULE % "delete"),
]


@dataclasses.dataclass
class Matrix:
    roles: list[str]
    #: (probe index, role) -> answer
    answers: dict[tuple[int, str], Answer] = dataclasses.field(default_factory=dict)

    def status(self, index: int, role: str) -> int:
        return self.answers[index, role][0]

    def render(self) -> str:
        """The matrix as a markdown table (``docs/api.md`` prints it)."""
        head = ["route", "policy", *self.roles]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for index, probe in enumerate(PROBES):
            cells = [f"`{probe.route}`", f"`{probe.rule}`" if probe.rule != PUBLIC else PUBLIC,
                     *(str(self.status(index, role)) for role in self.roles)]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)


def run(send: Send, roles: list[str], ids: dict[str, Any]) -> Matrix:
    """Send every probe as every role (``roles`` in order; put the admin last).

    :param ids: ``agg``, ``victim``, ``job``, ``image``, ``host``, ``hypervisor``,
        ``flavor``, ``flavor_victim``, ``private_flavor``, ``project``, ``server``,
        ``server_victim`` (role -> id) and ``prefix``.
    """
    matrix = Matrix(roles)
    for role in roles:
        for index, probe in enumerate(PROBES):
            path, body = probe.fill({**ids, "role": role})
            matrix.answers[index, role] = send(
                None if role == "no token" else role, probe.method, path, body,
                probe.microversion)
    return matrix


def check(matrix: Matrix) -> list[str]:
    """What differs from the expected policy: :returns: one line per wrong answer."""
    wrong = []
    for (index, role), (status, body) in matrix.answers.items():
        probe = PROBES[index]
        where = f"{probe.route} as {role}: {status}"
        if probe.rule == PUBLIC:
            if status != 200:
                wrong.append(f"{where}, want 200")
        elif role == "no token":
            if status != 401:
                wrong.append(f"{where}, want 401")
        elif role in probe.allowed:
            if status in (401, 403) or status >= 500:
                wrong.append(f"{where}, want {role} authorized")
        elif role in probe.hidden:
            if status != 404:
                wrong.append(f"{where}, want 404 (another project's)")
        elif status != 403:
            wrong.append(f"{where}, want 403")
        elif not (isinstance(body, dict) and list(body) == ["forbidden"]
                  and body["forbidden"].get("code") == 403
                  and probe.rule in body["forbidden"].get("message", "")):
            wrong.append(f"{where}, fault body {body!r} names no rule {probe.rule}")
    return wrong
