"""A throwaway Glance image of random bytes for the benchmarks that download one."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import requests
from _benchlib import log

CHUNK = 4 * 1024 * 1024


@contextlib.contextmanager
def glance_image(glance: str, size: int, workdir: Path, name: str,
                 store: str | None = None) -> Iterator[dict[str, object]]:
    """A new active image of ``size`` random bytes (in Glance's ``store``, else its default
    store), uploaded with ``curl -T``; deleted afterwards."""
    try:
        requests.get(glance, timeout=5)
    except requests.ConnectionError:
        sys.exit(f"no Glance at {glance}: start the local stack first (tools/stack.sh up)")
    resp = requests.post(f"{glance}/v2/images", timeout=30, json={
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
             *store_header, "-T", str(source), f"{glance}/v2/images/{image_id}/file"],
            check=True)
        source.unlink()
        log(f"uploaded {size} bytes to Glance image {image_id} ({store or 'default'} store) in "
            f"{time.monotonic() - started:.1f} s")
        image = requests.get(f"{glance}/v2/images/{image_id}", timeout=30).json()
        if image["status"] != "active" or image["size"] != size:
            raise RuntimeError(f"upload did not make an active image: {image}")
        yield image
    finally:
        requests.delete(f"{glance}/v2/images/{image_id}", timeout=60)
