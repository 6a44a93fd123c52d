"""A real Placement on PostgreSQL for the scheduling benchmark, filled with many providers fast.

:func:`placement_server` creates a database of its own on the machine's PostgreSQL (the one the
stack's Placement uses), runs openstack-placement's WSGI app under gunicorn as the stack does
(one worker, eight threads, noauth2; ``sync_on_startup`` creates the schema and the standard
traits and resource classes), and drops the database at the end.

:func:`load_providers` writes the providers straight into that schema with Placement's own
SQLAlchemy table definitions (``placement.db.sqlalchemy.models``) in bulk inserts: the API
takes four requests per provider (create, inventory, traits, aggregates), 40,000 requests for
10,000 providers, which is minutes on a shared two-core machine; the bulk load takes seconds
and leaves the rows the API would have written (generation as after those writes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg2
import sqlalchemy as sa
from _benchlib import free_port, log, terminate, wait_for_port

BIN = Path(sys.executable).parent
PG = "postgresql+psycopg2://postgres@127.0.0.1:5432"


@dataclasses.dataclass(frozen=True)
class Provider:
    uuid: str
    name: str
    traits: Sequence[str]
    aggregates: Sequence[str]
    vcpus: int = 32
    memory_mb: int = 131072
    disk_gb: int = 2000


def _admin(sql: str) -> None:
    conn = psycopg2.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres")
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
    finally:
        conn.close()


@contextlib.contextmanager
def placement_server(database: str) -> Iterator[tuple[str, str]]:
    """Placement on a fresh PostgreSQL database ``database``; yields (endpoint, db url)."""
    _admin(f"DROP DATABASE IF EXISTS {database}")
    _admin(f"CREATE DATABASE {database}")
    url = f"{PG}/{database}"
    with tempfile.TemporaryDirectory(prefix="bench-placement-") as etc:
        Path(etc, "placement.conf").write_text(
            "[DEFAULT]\ndebug = false\n[api]\nauth_strategy = noauth2\n"
            f"[placement_database]\nconnection = {url}\nsync_on_startup = true\n")
        port = free_port()
        log_file = open(Path(etc, "placement.log"), "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{port}", "--workers", "1",
             "--threads", "8", "placement.wsgi.api:application"],
            env={**os.environ, "OS_PLACEMENT_CONFIG_DIR": etc},
            stdout=log_file, stderr=subprocess.STDOUT)
        try:
            wait_for_port(port, 120, proc)
            _wait_ready(f"http://127.0.0.1:{port}/", 180, proc)
            yield f"http://127.0.0.1:{port}", url
        finally:
            terminate([proc])
            log_file.close()
            _admin(f"DROP DATABASE IF EXISTS {database}")


def _wait_ready(url: str, timeout: float, proc: subprocess.Popen[bytes]) -> None:
    """Wait for Placement's root document: gunicorn listens before its worker has loaded the
    app, which creates the schema and the standard traits and resource classes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"Placement exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"Placement did not answer {url} within {timeout} s")


def _pairs(conn: sa.Connection, key: Any, value: Any) -> dict[Any, Any]:
    return {row[0]: row[1] for row in conn.execute(sa.select(key, value))}


def load_providers(url: str, providers: Sequence[Provider]) -> None:
    """Insert ``providers`` (inventory VCPU/MEMORY_MB/DISK_GB, traits, aggregates) in bulk."""
    from placement.db.sqlalchemy import models as pm

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            classes = _pairs(conn, pm.ResourceClass.name, pm.ResourceClass.id)
            wanted_traits = {t for p in providers for t in p.traits}
            known = _pairs(conn, pm.Trait.name, pm.Trait.id)
            new = sorted(wanted_traits - set(known))
            if new:
                conn.execute(sa.insert(pm.Trait), [{"name": t} for t in new])
                known = _pairs(conn, pm.Trait.name, pm.Trait.id)
            aggregates = sorted({a for p in providers for a in p.aggregates})
            conn.execute(sa.insert(pm.PlacementAggregate), [{"uuid": a} for a in aggregates])
            agg_ids = _pairs(conn, pm.PlacementAggregate.uuid, pm.PlacementAggregate.id)
            start = (conn.execute(sa.select(sa.func.max(pm.ResourceProvider.id))).scalar()
                     or 0) + 1
            rps, inventories, traits, memberships = [], [], [], []
            for n, p in enumerate(providers):
                rp_id = start + n
                rps.append({"id": rp_id, "uuid": p.uuid, "name": p.name, "generation": 3,
                            "root_provider_id": rp_id, "parent_provider_id": None})
                for rc, total in (("VCPU", p.vcpus), ("MEMORY_MB", p.memory_mb),
                                  ("DISK_GB", p.disk_gb)):
                    inventories.append({
                        "resource_provider_id": rp_id, "resource_class_id": classes[rc],
                        "total": total, "reserved": 0, "min_unit": 1, "max_unit": total,
                        "step_size": 1, "allocation_ratio": 1.0})
                traits += [{"trait_id": known[t], "resource_provider_id": rp_id}
                           for t in p.traits]
                memberships += [{"resource_provider_id": rp_id, "aggregate_id": agg_ids[a]}
                                for a in p.aggregates]
            conn.execute(sa.insert(pm.ResourceProvider), rps)
            conn.execute(sa.insert(pm.Inventory), inventories)
            conn.execute(sa.insert(pm.ResourceProviderTrait), traits)
            conn.execute(sa.insert(pm.ResourceProviderAggregate), memberships)
            # the ids were given: move the sequence past them for the API's own inserts
            conn.execute(sa.text("SELECT setval(pg_get_serial_sequence('resource_providers', "
                                 "'id'), (SELECT max(id) FROM resource_providers))"))
    finally:
        engine.dispose()
    log(f"loaded {len(providers)} providers, {len(aggregates)} aggregates into Placement")
