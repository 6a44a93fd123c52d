"""A throwaway Glance image of random bytes for the benchmarks that download one, and the
local stack's identity: its Glance sits behind Keystone, so every request carries the admin's
token (:func:`stack_token`; curl reads it from a header file of mode 0600, never argv)."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import requests
from _benchlib import log

CHUNK = 4 * 1024 * 1024


def stack_env(stack_dir: str | Path) -> dict[str, str]:
    """The ``export NAME=value`` lines of the stack's ``env`` (the admin's ``OS_*`` too)."""
    path = Path(stack_dir) / "env"
    if not path.is_file():
        sys.exit(f"{path} is missing: start the local stack first (tools/stack.sh up)")
    env = {}
    for line in path.read_text().splitlines():
        words = shlex.split(line, comments=True)
        if len(words) == 2 and words[0] == "export":
            key, _, value = words[1].partition("=")
            env[key] = value
    return env


def stack_token(env: dict[str, str]) -> str:
    """A token of the stack's admin (password auth from ``env``'s ``OS_*``); Keystone's
    tokens last an hour, longer than any bench run."""
    from keystoneauth1 import session
    from keystoneauth1.identity import v3

    auth = v3.Password(
        auth_url=env["OS_AUTH_URL"], username=env["OS_USERNAME"], password=env["OS_PASSWORD"],
        project_name=env["OS_PROJECT_NAME"], user_domain_name=env["OS_USER_DOMAIN_NAME"],
        project_domain_name=env["OS_PROJECT_DOMAIN_NAME"])
    token = session.Session(auth=auth).get_token()
    if not token:
        sys.exit(f"Keystone at {env['OS_AUTH_URL']} gave the stack's admin no token")
    return str(token)


def token_header_file(token: str, workdir: Path) -> Path:
    """``X-Auth-Token: <token>`` in a file only this user reads (``curl -H @file``)."""
    path = workdir / "auth.header"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"X-Auth-Token: {token}\n")
    return path


@contextlib.contextmanager
def glance_image(glance: str, size: int, workdir: Path, name: str, token: str,
                 store: str | None = None) -> Iterator[dict[str, object]]:
    """A new active image of ``size`` random bytes (in Glance's ``store``, else its default
    store), uploaded with ``curl -T`` as the holder of ``token``; deleted afterwards."""
    try:
        requests.get(glance, timeout=5)
    except requests.ConnectionError:
        sys.exit(f"no Glance at {glance}: start the local stack first (tools/stack.sh up)")
    auth = {"X-Auth-Token": token}
    resp = requests.post(f"{glance}/v2/images", timeout=30, headers=auth, json={
        "name": name, "disk_format": "raw", "container_format": "bare"})
    resp.raise_for_status()
    image_id = resp.json()["id"]
    try:
        source = workdir / "upload-source"
        with open(source, "wb") as f:
            for _ in range(0, size, CHUNK):
                f.write(os.urandom(min(CHUNK, size - f.tell())))
        started = time.monotonic()
        store_header = ["-H", f"X-Image-Meta-Store: {store}"] if store else []
        subprocess.run(
            ["curl", "-sSf", "-X", "PUT", "-H", "Content-Type: application/octet-stream",
             "-H", f"@{token_header_file(token, workdir)}", *store_header, "-T", str(source),
             f"{glance}/v2/images/{image_id}/file"],
            check=True)
        source.unlink()
        log(f"uploaded {size} bytes to Glance image {image_id} ({store or 'default'} store) in "
            f"{time.monotonic() - started:.1f} s")
        image = requests.get(f"{glance}/v2/images/{image_id}", timeout=30, headers=auth).json()
        if image["status"] != "active" or image["size"] != size:
            raise RuntimeError(f"upload did not make an active image: {image}")
        yield image
    finally:
        requests.delete(f"{glance}/v2/images/{image_id}", timeout=60, headers=auth)
