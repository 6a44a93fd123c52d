"""The real fleetcache daemons of bench/fanout.py (``fleetcache-conductor``, ``fleetcache-api``)
and a small client of the pre-cache API.

Both daemons read one configuration file written here: the bench broker's API-level vhost, the
run's database, ``noauth``, a local image directory holding the benchmark's image, and
``precache_concurrency`` = the run's concurrency. Notifications stay on (``messagingv2``): they
are part of what the job costs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import requests
from _benchlib import BIN, cpu_seconds, free_port, log, terminate, wait_for_port

MICROVERSION = "2.81"
#: The daemons' systemd units: the bench runs each daemon with its unit's environment.
UNITS = Path(__file__).resolve().parent.parent / "etc" / "systemd"


def unit_environment(binary: str) -> dict[str, str]:
    """The ``Environment=NAME=VALUE`` lines of ``etc/systemd/<binary>.service`` (unquoted
    values only, as the project's units write them)."""
    unit = UNITS / f"{binary}.service"
    if not unit.exists():
        return {}
    pairs = (line.removeprefix("Environment=").split("=", 1)
             for line in unit.read_text().splitlines() if line.startswith("Environment="))
    return {name: value for name, value in pairs}
CONFIG = """\
[DEFAULT]
transport_url = {transport_url}
service_down_time = 86400
rpc_response_timeout = 60
long_rpc_timeout = 1800
debug = false

[database]
connection = {db_url}
max_pool_size = {db_pool}

[api]
auth_strategy = noauth
bind_host = 127.0.0.1
bind_port = {api_port}

[quota]
# noauth has no Keystone to hold unified limits.
driver = noop

[image_source]
backend = local
local_directory = {image_dir}

[image_cache]
precache_concurrency = {concurrency}

[oslo_messaging_rabbit]
rpc_conn_pool_size = {conn_pool}

[oslo_messaging_notifications]
driver = {notifications}
"""


def write_local_image(image_dir: Path, image_id: str) -> None:
    """One small active image in the ``local`` image source's directory."""
    from fleetcache.image import local

    data = image_dir.parent / "image-data"
    data.write_bytes(b"fcbench image\n")
    local.add_image(str(image_dir), str(data), image_id=image_id, name="fcbench")


class Services:
    """The conductor and API processes of one run."""

    def __init__(self, workdir: Path, transport_url: str, db_url: str, concurrency: int,
                 image_id: str, notifications: str = "messagingv2") -> None:
        self.workdir = workdir
        self.api_port = free_port()
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        self.config = workdir / "fleetcache.conf"
        image_dir = workdir / "images"
        write_local_image(image_dir, image_id)
        self.config.write_text(CONFIG.format(
            transport_url=transport_url, db_url=db_url, api_port=self.api_port,
            image_dir=image_dir, concurrency=concurrency, conn_pool=max(30, concurrency + 4),
            db_pool=max(10, min(concurrency, 40)), notifications=notifications,
        ))
        self.conductor: subprocess.Popen[bytes] | None = None
        self.api: subprocess.Popen[bytes] | None = None

    def _spawn(self, binary: str) -> subprocess.Popen[bytes]:
        logfile = open(self.workdir / f"{binary}.log", "wb")  # noqa: SIM115
        return subprocess.Popen(
            [str(BIN / binary), "--config-file", str(self.config)],
            stdout=logfile, stderr=subprocess.STDOUT,
            env={**os.environ, **unit_environment(binary)},
        )

    def start(self, api: bool = True) -> None:
        self.conductor = self._spawn("fleetcache-conductor")
        if api:
            self.api = self._spawn("fleetcache-api")
            try:
                wait_for_port(self.api_port, timeout=60, proc=self.api)
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}\n{self._log_tail('fleetcache-api')}") from exc
        time.sleep(3.0)  # let the conductor's RPC servers come up
        if self.conductor.poll() is not None:
            raise RuntimeError(f"fleetcache-conductor exited:\n"
                               f"{self._log_tail('fleetcache-conductor')}")
        log(f"fleetcache-conductor pid {self.conductor.pid}"
            + (f", fleetcache-api pid {self.api.pid} on {self.api_url}" if self.api else ""))

    def _log_tail(self, binary: str, lines: int = 30) -> str:
        path = self.workdir / f"{binary}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def conductor_pid(self) -> int:
        assert self.conductor is not None
        return self.conductor.pid

    def job_elapsed(self, job_uuid: str) -> float | None:
        """The job's own run time, from the conductor's summary log line."""
        pattern = re.compile(rf"job {job_uuid} on aggregate \S+ completed in ([0-9.]+) s")
        for line in (self.workdir / "fleetcache-conductor.log").read_text().splitlines():
            match = pattern.search(line)
            if match:
                return float(match.group(1))
        return None

    def conductor_cpu(self) -> float:
        assert self.conductor is not None
        return cpu_seconds(self.conductor.pid)

    def conductor_memory(self) -> tuple[float, float]:
        """The conductor's resident memory now and its peak so far (VmRSS, VmHWM), in MiB."""
        assert self.conductor is not None
        fields = {}
        with open(f"/proc/{self.conductor.pid}/status") as status:
            for line in status:
                key, _, value = line.partition(":")
                fields[key] = value.split()
        return int(fields["VmRSS"][0]) / 1024, int(fields["VmHWM"][0]) / 1024

    def conductor_smaps(self) -> dict[str, float]:
        """Where the conductor's resident memory lies, in MiB (``/proc/PID/smaps``): glibc's
        main heap (``[heap]``), its per-thread arenas (anonymous regions starting on a
        64 MiB boundary: each arena reserves 64 MiB so aligned and makes what it uses
        writable), other anonymous regions (CPython's 1 MiB small-object arenas, large
        ``malloc`` blocks that glibc maps on their own, thread stacks) and files (code,
        libraries)."""
        assert self.conductor is not None
        out = dict.fromkeys(("heap", "thread arenas", "other anonymous", "files"), 0.0)
        kind = "files"
        with open(f"/proc/{self.conductor.pid}/smaps") as smaps:
            for line in smaps:
                fields = line.split()
                if "-" in fields[0] and len(fields) >= 5:  # a region's header
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    name = fields[5] if len(fields) > 5 else ""
                    kind = ("heap" if name == "[heap]" else "files" if name.startswith("/")
                            else "thread arenas" if not name and start % (64 << 20) == 0
                            else "other anonymous" if not name or name.startswith("[anon")
                            else "files")
                elif fields[0] == "Rss:":
                    out[kind] += int(fields[1]) / 1024
        return out

    def api_cpu(self) -> float:
        assert self.api is not None
        return cpu_seconds(self.api.pid)

    def stop(self) -> None:
        terminate([p for p in (self.api, self.conductor) if p is not None], timeout=20)


class ApiClient:
    """The two calls of the benchmark, as the ``openstack`` client makes them (noauth)."""

    def __init__(self, base_url: str) -> None:
        self.base = base_url.rstrip("/")
        self.session = requests.Session()
        self.session.headers.update({
            "OpenStack-API-Version": f"compute {MICROVERSION}",
            "X-OpenStack-Nova-API-Version": MICROVERSION,
            "X-User-Id": "fcbench", "X-Project-Id": "fcbench", "X-Roles": "admin",
            "Content-Type": "application/json",
        })

    def cache_images(self, aggregate_id: int, image_ids: list[str]) -> str:
        """POST the request. :returns: the job's URL (the ``Location`` header)."""
        body = {"cache": [{"id": i} for i in image_ids]}
        resp = self.session.post(f"{self.base}/v2.1/os-aggregates/{aggregate_id}/images",
                                 data=json.dumps(body), timeout=60)
        if resp.status_code != 202:
            raise RuntimeError(f"POST images: {resp.status_code} {resp.text[:500]}")
        location = resp.headers["Location"]
        return location if location.startswith("http") else self.base + location

    def get_job(self, url: str) -> dict[str, Any]:
        resp = self.session.get(url, timeout=60)
        resp.raise_for_status()
        body = resp.json()
        return body.get("job", body)  # type: ignore[no-any-return]

    def wait_job(self, url: str, timeout: float, interval: float = 0.5) -> dict[str, Any]:
        """Poll until the job is ``done`` or ``failed``.

        NOTE: each GET serialises every host's result; polling faster would load the API (and
        the CPUs the job runs on). The wall time reported comes from ``finished_at``, so the
        interval costs no precision.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.get_job(url)
            if job["state"] in ("done", "failed"):
                return job
            time.sleep(interval)
        raise RuntimeError(f"job {url} not finished after {timeout} s")

    @staticmethod
    def counts(job: dict[str, Any]) -> dict[str, int]:
        """Per-state counts of host/image results."""
        return {k: int(v) for k, v in job["counts"].items()}


class RpcClient:
    """The same request straight to the conductor over RPC (no API), job polled in the DB.

    Tells the API's share of the job apart from the conductor's (``--entry rpc``).
    """

    def __init__(self, transport_url: str, db_url: str) -> None:
        from oslo_config import cfg

        from fleetcache.common import config, context, rpc
        from fleetcache.common.db.session import Database
        from fleetcache.conductor import rpcapi

        self.conf = cfg.ConfigOpts()
        config.register_all(self.conf)
        self.conf([], project="fleetcache", default_config_files=[])
        self.ctxt = context.get_admin_context()
        self.transports = rpc.Transports(self.conf)
        self.api = rpcapi.ConductorAPI(self.conf, self.transports.get(transport_url))
        self.db = Database(db_url)

    def cache_images(self, aggregate_id: int, image_ids: list[str]) -> str:
        job = self.api.cache_images(self.ctxt, aggregate_id, image_ids)
        return str(job["uuid"])

    def wait_job(self, job_uuid: str, timeout: float, interval: float = 0.5) -> dict[str, Any]:
        from sqlalchemy import func, select

        from fleetcache.common.db import models

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.db.transaction() as session:
                job = session.execute(
                    select(models.CacheJob.id, models.CacheJob.state,
                           models.CacheJob.finished_at, models.CacheJob.error)
                    .where(models.CacheJob.uuid == job_uuid)).one()
                if job.state in ("done", "failed"):
                    counts = dict(session.execute(
                        select(models.CacheJobResult.state, func.count())
                        .where(models.CacheJobResult.job_id == job.id)
                        .group_by(models.CacheJobResult.state)).all())
                    return {"state": job.state, "error": job.error, "counts": counts,
                            "finished_at": job.finished_at.isoformat()}
            time.sleep(interval)
        raise RuntimeError(f"job {job_uuid} not finished after {timeout} s")

    counts = staticmethod(ApiClient.counts)
