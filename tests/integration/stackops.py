"""Small operations on the running stack that several integration tests share: freezing a
daemon, and a pre-cache request followed to its end."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

MV = "2.81"


@contextlib.contextmanager
def frozen(stack: Any, name: str) -> Iterator[None]:
    """Stop (SIGSTOP) the process group of stack daemon ``name`` for the block: it stays
    alive and registered but answers nothing, as a hung host would."""
    pid = int((stack.dir / "run" / f"{name}.pid").read_text().split()[0])
    os.killpg(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(pid, signal.SIGCONT)


def precache_and_wait(stack: Any, agg_id: int, image_id: str, pin: int | None,
                      timeout: float = 120) -> dict[str, Any]:
    """Ask for ``image_id`` on aggregate ``agg_id`` (pinned for ``pin`` seconds when given)
    and return the job once it is ``done`` or ``failed``."""
    body: dict[str, Any] = {"cache": [{"id": image_id}]}
    if pin is not None:
        body["fleetcache:pin_seconds"] = pin
    resp = stack.api_request("POST", f"os-aggregates/{agg_id}/images", microversion=MV,
                             json=body)
    assert resp.status_code == 202, resp.text
    path = resp.headers["Location"].split("/v2.1/", 1)[1]
    deadline = time.monotonic() + timeout
    while True:
        job: dict[str, Any] = stack.api_request("GET", path, microversion=MV).json()["job"]
        if job["state"] in ("done", "failed"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.3)
