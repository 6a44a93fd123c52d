"""The route x role matrix of the API's default policies, shared by the functional test (noauth
headers, in process) and the integration test (real Keystone tokens, raw HTTP).

A run creates, as the admin, an aggregate the probes work on (``{agg}``), a second one only
the ``DELETE`` probe removes (``{victim}``) and a pre-cache job (``{job}``); then every role
sends every probe, the admin last (its writes would change what the others see). Each probe
names the route as ``docs/api.md`` does and the policy rule that guards it.

Expected, as Nova ships its aggregate policies: the admin is authorized everywhere; a project
member or reader (of this or another project) gets 403 with a ``forbidden`` fault on every
route but discovery; a request without a valid token gets 401 (keystone mode only).
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


@dataclasses.dataclass(frozen=True)
class Probe:
    method: str
    #: Under the API root; ``{agg}``, ``{victim}``, ``{job}``, ``{image}``, ``{host}``.
    path: str
    rule: str
    body: dict[str, Any] | None = None
    microversion: str | None = None

    @property
    def route(self) -> str:
        label = self.path.split("?")[0]
        if self.body and self.path.endswith("/action"):
            label += f" ({next(iter(self.body))})"
        return f"{self.method} {label}"

    def fill(self, ids: dict[str, str]) -> tuple[str, Any]:
        """The concrete path and body for the run's ids."""
        return self.path.format(**ids), _filled(self.body, ids)


def _filled(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with ``{name}`` placeholders in its strings replaced."""
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, dict):
        return {key: _filled(item, ids) for key, item in value.items()}
    if isinstance(value, list):
        return [_filled(item, ids) for item in value]
    return value


AGG = "/v2.1/os-aggregates"
PROBES: list[Probe] = [
    Probe("GET", "/", PUBLIC),
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
    Probe("GET", "/v2.1/images/{image}", "fleetcache:images:show"),
    Probe("GET", "/v2.1/images?id={image}", "fleetcache:images:show"),
    Probe("GET", "/v2.1/v2/images?id=in:{image}", "fleetcache:images:show"),
    Probe("DELETE", AGG + "/{victim}", "os_compute_api:os-aggregates:delete"),
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


def run(send: Send, roles: list[str], ids: dict[str, str]) -> Matrix:
    """Send every probe as every role (``roles`` in order; put the admin last).

    :param ids: ``agg``, ``victim``, ``job``, ``image``, ``host`` and ``prefix``.
    """
    matrix = Matrix(roles)
    for role in roles:
        for index, probe in enumerate(PROBES):
            path, body = probe.fill({**ids, "role": role})
            matrix.answers[index, role] = send(
                None if role == "no token" else role, probe.method, path, body,
                probe.microversion)
    return matrix


def check(matrix: Matrix, admin: str = "admin") -> list[str]:
    """What differs from the expected policy: :returns: one line per wrong answer."""
    wrong = []
    for (index, role), (status, body) in matrix.answers.items():
        probe = PROBES[index]
        where = f"{probe.route} as {role}: {status}"
        if probe.rule == PUBLIC:
            if status != 200:
                wrong.append(f"{where}, want 200")
        elif role == admin:
            if status in (401, 403) or status >= 500:
                wrong.append(f"{where}, want the admin authorized")
        elif role == "no token":
            if status != 401:
                wrong.append(f"{where}, want 401")
        elif status != 403:
            wrong.append(f"{where}, want 403")
        elif not (isinstance(body, dict) and list(body) == ["forbidden"]
                  and body["forbidden"].get("code") == 403
                  and probe.rule in body["forbidden"].get("message", "")):
            wrong.append(f"{where}, fault body {body!r} names no rule {probe.rule}")
    return wrong
