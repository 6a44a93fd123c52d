"""No password and no token in any log of the stack, at any level (the fleetcache daemons run
with ``debug = true``). Runs after every other integration test (conftest orders it last), so
the logs hold a whole run: logins, token validations, RPC contexts, Glance and Placement calls.
"""

from __future__ import annotations

import re
import stat

import pytest

from tests.integration.conftest import Stack

pytestmark = pytest.mark.integration

#: Every fernet token (Keystone's only token format here) begins with the fernet version byte
#: and a timestamp: base64url "gAAAAA", then well over 100 characters.
FERNET_TOKEN = re.compile(rb"gAAAAA[0-9A-Za-z_-]{40,}")


def test_no_password_or_token_in_any_log(stack: Stack) -> None:
    logs = sorted(p for p in (stack.dir / "log").rglob("*") if p.is_file())
    assert any(p.name == "api.log" for p in logs), logs
    secrets = {name: value.encode() for name, value in stack.passwords().items()}
    secrets["a token of this run"] = stack.token("admin").encode()
    found = []
    for path in logs:
        data = path.read_bytes()
        found += [f"{path.name}: {name}" for name, value in secrets.items() if value in data]
        found += [f"{path.name}: a fernet token {m.group()[:12].decode()}..."
                  for m in FERNET_TOKEN.finditer(data)]
    assert found == []


def test_configs_and_env_files_are_private(stack: Stack) -> None:
    files = [*stack.dir.glob("env*"), stack.dir / "placement-env",
             *(p for p in (stack.dir / "etc").rglob("*") if p.is_file()),
             *(stack.dir / "glance" / "etc").glob("*"), *(stack.dir / "keystone" / "etc").glob("*"),
             *(stack.dir / "placement" / "etc").glob("*")]
    assert len(files) > 8, files
    loose = [f"{p}: {stat.filemode(p.stat().st_mode)}" for p in files
             if p.stat().st_mode & 0o077]
    assert loose == []
