"""The local stack's identity, as its env files describe it: each user's ``OS_*`` variables,
the keystoneauth plugin they make, and a ``requests`` session that sends that user's token.

``tools/stack.sh up`` writes ``.stack/env`` (the admin), ``.stack/env.member``,
``.stack/env.reader`` and ``.stack/env.other`` (tools/keystone/stack-keystone.bash says who
they are).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import requests
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

#: The stack's users -> the env file with their OS_*.
USERS = {"admin": "env", "member": "env.member", "reader": "env.reader", "other": "env.other"}


def read_env_file(path: Path) -> dict[str, str]:
    """The ``export NAME=value`` lines of ``.stack/env`` as a dict."""
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line, comments=True)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, _, value = words[1].partition("=")
            env[name] = value
    return env


def password_auth(env: dict[str, str]) -> v3.Password:
    """The keystoneauth plugin the ``OS_*`` variables of an env file describe."""
    return v3.Password(
        auth_url=env["OS_AUTH_URL"], username=env["OS_USERNAME"], password=env["OS_PASSWORD"],
        project_name=env["OS_PROJECT_NAME"], user_domain_name=env["OS_USER_DOMAIN_NAME"],
        project_domain_name=env["OS_PROJECT_DOMAIN_NAME"])


class TokenSession(requests.Session):
    """A ``requests`` session that sends a keystoneauth session's token (renewed before it
    expires) on every request: raw HTTP to Glance or the API as one user."""

    def __init__(self, keystone: ks_session.Session) -> None:
        super().__init__()
        self.keystone = keystone

    def request(self, method: str | bytes, url: str | bytes,  # type: ignore[override]
                *args: Any, **kwargs: Any) -> requests.Response:
        headers = dict(kwargs.pop("headers", None) or {})
        headers.setdefault("X-Auth-Token", self.keystone.get_token())
        return super().request(method, url, *args, headers=headers, **kwargs)
