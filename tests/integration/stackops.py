"""Small operations on the running stack that several integration tests share: where a
compute caches an image (and forgetting it), what Glance says of an image and how often it
served its data, a pre-cache job read and followed to its end (and its pin's length), terms
for a job that waits a little, the ``fleetcache`` CLI run against the stack, and freezing a
daemon."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fleetcache.compute.imagecache import PART_MARK, PAUSED_MARK, cache_name
from tests.integration.glance_log import GlanceRequest
from tests.waiting import wait_for

MV = "2.81"
_FINAL_JOB_STATES = ("done", "failed")
#: The venv whose ``fleetcache`` console script the tests run (this tree's code comes first
#: on the ``PYTHONPATH`` the tests run with).
VENV = Path(os.environ.get("FLEETCACHE_VENV", Path(__file__).parents[2] / ".venv"))


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


def cached_file(stack: Any, host: str, image_id: str) -> Path:
    """Where compute ``host`` keeps its complete copy of ``image_id`` (the test reads the
    directory the compute writes, not what the compute reports)."""
    return Path(stack.computes[host]) / "_base" / cache_name(image_id)


def partial_files(stack: Any, host: str, image_id: str) -> list[Path]:
    """The partial downloads of ``image_id`` on compute ``host``, sorted by name."""
    base = Path(stack.computes[host]) / "_base"
    return sorted(base.glob(f".{cache_name(image_id)}{PART_MARK}*"))


def paused_file(stack: Any, host: str, image_id: str) -> Path:
    """Where compute ``host`` keeps the paused download of ``image_id`` (a call's end time
    stopped it), if it has one."""
    return Path(stack.computes[host]) / "_base" / f".{cache_name(image_id)}{PAUSED_MARK}"


def forget(stack: Any, image_id: str) -> None:
    """Remove ``image_id`` (and any partial or paused download of it) from every compute's
    cache, so that the stack, shared by the whole session, holds no trace of a test's
    image."""
    for host in stack.computes:
        cached_file(stack, host, image_id).unlink(missing_ok=True)
        paused_file(stack, host, image_id).unlink(missing_ok=True)
        for partial in partial_files(stack, host, image_id):
            partial.unlink(missing_ok=True)


def file_sha512(path: Path) -> str:
    """The SHA-512 of a file, read in 1 MiB chunks (cached images run to hundreds of MiB);
    Glance's ``os_hash_value`` is this digest."""
    digest = hashlib.sha512()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def glance_image(stack: Any, image_id: str) -> dict[str, Any]:
    """Glance's record of ``image_id`` (``GET /v2/images/<id>``), as the admin sees it."""
    resp = stack.glance.get(f"{stack.glance_url}/v2/images/{image_id}", timeout=30)
    resp.raise_for_status()
    body: dict[str, Any] = resp.json()
    return body


def file_gets(stack: Any, image_id: str, at_least: int = 0,
              timeout: float = 10) -> list[GlanceRequest]:
    """Glance's ``GET /v2/images/<id>/file`` requests of ``image_id`` in its access log.

    :param at_least: wait up to ``timeout`` seconds for that many (Glance writes a line
        when its response ends, just after the compute read the last byte), then return
        what is there: the caller judges the count.
    """
    path = f"/v2/images/{image_id}/file"
    deadline = time.monotonic() + timeout
    while True:
        gets = [r for r in stack.glance_requests() if r.method == "GET" and r.path == path]
        if len(gets) >= at_least or time.monotonic() > deadline:
            return gets
        time.sleep(0.2)


@contextlib.contextmanager
def sha512_image(stack: Any, mib: int, prefix: str) -> Iterator[dict[str, Any]]:
    """A new raw image of ``mib`` random MiB that Glance hashed with sha512 (peers take only
    images with a multihash), deleted with its cached copies after the block.
    :returns: Glance's record, plus ``data``."""
    data = os.urandom(mib << 20)
    with raw_image(stack, data, prefix) as body:
        assert body["status"] == "active" and body["os_hash_algo"] == "sha512", body
        yield {**body, "data": data}


@contextlib.contextmanager
def raw_image(stack: Any, data: Any, prefix: str, timeout: float = 600) -> Iterator[dict[str, Any]]:
    """A new raw image of ``data`` (bytes, or an iterable of chunks) in the stack's Glance, so
    that no compute has it; deleted, with its cached copies, after the block.
    :returns: Glance's record of it."""
    resp = stack.glance.post(f"{stack.glance_url}/v2/images", timeout=30, json={
        "name": f"{prefix}-{uuid.uuid4().hex[:8]}", "disk_format": "raw",
        "container_format": "bare"})
    resp.raise_for_status()
    image_id = resp.json()["id"]
    try:
        stack.glance.put(f"{stack.glance_url}/v2/images/{image_id}/file", data=data,
                         headers={"Content-Type": "application/octet-stream"},
                         timeout=timeout).raise_for_status()
        yield glance_image(stack, image_id)
    finally:
        stack.glance.delete(f"{stack.glance_url}/v2/images/{image_id}", timeout=30)
        forget(stack, image_id)


def get_job(stack: Any, agg_id: int, job_id: str) -> dict[str, Any]:
    """Pre-cache job ``job_id`` of aggregate ``agg_id`` as the API shows it."""
    resp = stack.api_request("GET", f"os-aggregates/{agg_id}/images/jobs/{job_id}",
                             microversion=MV)
    resp.raise_for_status()
    job: dict[str, Any] = resp.json()["job"]
    return job


def wait_job_done(stack: Any, agg_id: int, job_id: str,
                  timeout: float = 120) -> dict[str, Any]:
    """:returns: job ``job_id`` of aggregate ``agg_id`` once it is ``done`` or ``failed``."""
    def finished() -> dict[str, Any] | None:
        job = get_job(stack, agg_id, job_id)
        return job if job["state"] in _FINAL_JOB_STATES else None

    return wait_for(finished, f"job {job_id} to end", timeout, interval=0.3)


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
    job_id = resp.headers["Location"].rsplit("/", 1)[-1]
    return wait_job_done(stack, agg_id, job_id, timeout)


def pin_length(job: dict[str, Any]) -> float:
    """Seconds from the job's creation to the end of its pin (``pin_until``)."""
    created = datetime.datetime.fromisoformat(job["created_at"])
    return (datetime.datetime.fromisoformat(job["pin_until"]) - created).total_seconds()


def fleetcache_cli(stack: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the ``fleetcache`` CLI against the stack as the admin (catalog, Keystone)."""
    return subprocess.run([str(VENV / "bin" / "fleetcache"), *args], env=stack.process_env(),
                          capture_output=True, text=True, timeout=180, check=False)


def short_wait_terms(wait: float = 45) -> dict[str, Any]:
    """A job's terms (the API's keys without ``fleetcache:``) that hold the job ``scheduled``
    for ``wait`` seconds, then let it run: a daily window around now (UTC, so it is open
    then), a deadline 15 minutes on, limits within the stack's caps (``[image_cache]
    precache_concurrency`` 1, no download caps) and a priority."""
    now = datetime.datetime.now(datetime.UTC)
    instant = "%Y-%m-%dT%H:%M:%SZ"
    return {
        "not_before": (now + datetime.timedelta(seconds=wait)).strftime(instant),
        "window": {"start": (now - datetime.timedelta(hours=1)).strftime("%H:%M"),
                   "end": (now + datetime.timedelta(hours=2)).strftime("%H:%M"),
                   "timezone": "UTC"},
        "deadline": (now + datetime.timedelta(minutes=15)).strftime(instant),
        "parallelism": 1,
        "host_bytes_per_second": 64 * 1024 * 1024,
        "job_bytes_per_second": 128 * 1024 * 1024,
        "priority": 70,
    }


def terms_options(terms: dict[str, Any]) -> list[str]:
    """The clients' options for :func:`short_wait_terms`'s terms."""
    window = terms["window"]
    return ["--not-before", terms["not_before"],
            "--window", f"{window['start']}-{window['end']}", "--timezone", window["timezone"],
            "--deadline", terms["deadline"], "--parallelism", str(terms["parallelism"]),
            "--host-rate", f"{terms['host_bytes_per_second'] // (1024 * 1024)}M",
            "--job-rate", f"{terms['job_bytes_per_second'] // (1024 * 1024)}M",
            "--priority", str(terms["priority"])]

