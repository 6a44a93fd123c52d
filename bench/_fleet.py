"""The fake fleet of bench/fanout.py: database rows and compute processes for N hosts in cells.

Registration is not what the benchmark measures, so the hosts are written straight into the
database (``service_register``, then the aggregate's host rows in one transaction), and the
conductor runs with a large ``service_down_time`` so that every host counts as up.
"""

from __future__ import annotations

import dataclasses
import select
import subprocess
import sys
import time
from pathlib import Path

from _benchlib import log, terminate

from fleetcache.common import binaries
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import migration, models
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database

SHARD_SCRIPT = Path(__file__).resolve().parent / "_fake_computes.py"


@dataclasses.dataclass
class Cell:
    name: str
    transport_url: str
    hosts: list[str]


def plan_cells(hosts: int, cells: int, broker_url: str, vhost_prefix: str) -> list[Cell]:
    """Deal ``hosts`` host names round-robin over ``cells`` cells, one vhost each."""
    plan = [
        Cell(f"cell{i + 1}", f"{broker_url}{vhost_prefix}_cell{i + 1}", [])
        for i in range(cells)
    ]
    for i in range(hosts):
        plan[i % cells].hosts.append(f"fcbench-{i:05d}")
    return plan


def setup_database(url: str, cells: list[Cell], aggregate_name: str) -> int:
    """Create the schema, the cells, one service per host and an aggregate over them all.

    :returns: the aggregate's id.
    """
    db = Database(url)
    try:
        migration.db_sync(db)
        migration.purge_all(db)
        started = time.monotonic()
        all_hosts: list[str] = []
        for cell in cells:
            cell_row = db_cells.cell_create(db, cell.name, cell.transport_url)
            for host in cell.hosts:
                db_services.service_register(db, host, binaries.COMPUTE, "compute", cell_row["id"],
                                             capabilities={"has_imagecache": True})
            all_hosts.extend(cell.hosts)
        agg = db_aggregates.aggregate_create(db, aggregate_name)
        with db.transaction() as session:
            session.add_all(
                models.AggregateHost(aggregate_id=agg["id"], host=h) for h in sorted(all_hosts)
            )
        log(f"database: {len(all_hosts)} services and aggregate {agg['id']} "
            f"in {time.monotonic() - started:.1f} s")
        return agg["id"]
    finally:
        db.dispose()


class Shards:
    """The processes hosting the fake computes, at most ``per_process`` hosts each, with one
    RPC server (and agent) per ``hosts_per_server`` hosts (1: one per host, as in a fleet).
    Every compute holds ``cached_image``, or, with ``download_seconds``, holds nothing and
    takes that long per image on every call."""

    def __init__(self, cells: list[Cell], per_process: int, executor_pool: int,
                 cached_image: str, hosts_per_server: int = 1,
                 download_seconds: float | None = None) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        for cell in cells:
            for start in range(0, len(cell.hosts), per_process):
                hosts = cell.hosts[start:start + per_process]
                cmd = [
                    sys.executable, str(SHARD_SCRIPT),
                    "--transport-url", cell.transport_url,
                    "--hosts", ",".join(hosts),
                    "--executor-pool", str(executor_pool),
                    "--cached-image", cached_image,
                    "--hosts-per-server", str(hosts_per_server),
                ]
                if download_seconds is not None:
                    cmd += ["--download-seconds", str(download_seconds)]
                self.procs.append(
                    subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                )

    def wait_ready(self, timeout: float) -> None:
        """Wait for every shard's ``READY`` line. :raises RuntimeError: on a failed shard."""
        deadline = time.monotonic() + timeout
        total = 0
        for proc in self.procs:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], max(0, deadline - time.monotonic()))
            line = proc.stdout.readline().decode().split() if ready else ["TIMEOUT"]
            if not line or line[0] != "READY":
                self.stop()
                raise RuntimeError(f"a compute shard failed to start: {line!r}")
            total += int(line[1])
        log(f"{total} fake computes listening in {len(self.procs)} processes")

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None and proc.poll() is None:
                proc.stdin.close()
        terminate(self.procs)
