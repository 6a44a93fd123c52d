#!/usr/bin/env python3
"""Where a pre-cache job's memory goes in the conductor, from 1,000 to 10,000 hosts (issue 12).

Drives :class:`fleetcache.conductor.precache.precacher.Precacher` in this process as the conductor
does (its host call pool of ``--concurrency`` workers, a coordinator pool, the result writer,
a SQLite database with one compute service per host over ``--cells`` cells and an aggregate
over them all), with fake compute clients that answer ``existing`` after ``--delay`` seconds
and a notifier that JSON-encodes each payload (as oslo.messaging's notifier driver does) and
drops it. RPC and the broker are left out: what is measured is what the job keeps per host.

Each ``--hosts`` count runs in a fresh child process (its database built beforehand by the
parent): a warm-up job, then ``--jobs`` measured jobs, and reports

* ``VmRSS`` before the warm-up and after each job, and ``VmHWM`` (the peak resident size)
  during each job (reset before it); the process's CPU per host during each job (the
  fake computes' sleeps cost none; the polling of the job's state is taken out);
* how many database connections the pool opened (each SQLite connection has a page cache of
  its own);
* after each job, who holds the memory: glibc (``mallinfo2``: in use, free but kept),
  CPython's small-object arenas and the blocks in use in them, SQLite
  (``sqlite3_memory_used``);
* the result writer's longest queue and the largest notification of each kind;
* with ``--trace`` (``tracemalloc``): the most Python memory each of the job's database and
  notification calls held at once, and the live allocations at 50 % and 90 % of the last
  job and after it, by line, the 12 largest differences against before the measured jobs;
* with ``--trim``: the same, glibc's ``malloc_trim(0)`` run after each job.

``tracemalloc`` slows the job down and adds its own tables to the resident size: take
resident sizes from runs without ``--trace``.

Run: ``.venv/bin/python bench/conductor_memory.py --hosts 1000 10000 [--trace] [--trim]``
"""

from __future__ import annotations

import _sqlite3
import argparse
import ctypes
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import futurist
from oslo_config import cfg
from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchlib import loadavg, log, parse_with_smoke  # noqa: E402
from _fleet import Cell, setup_database  # noqa: E402

from fleetcache.common import (
    config,  # noqa: E402
    rpc,
)
from fleetcache.common.context import get_admin_context  # noqa: E402
from fleetcache.common.db import aggregates as db_aggregates  # noqa: E402
from fleetcache.common.db import job_leases, jobs, models  # noqa: E402
from fleetcache.common.db.session import Database  # noqa: E402
from fleetcache.conductor.precache import job as precache  # noqa: E402
from fleetcache.conductor.precache import notifications  # noqa: E402
from fleetcache.conductor.precache.hostpool import HostCallPool  # noqa: E402
from fleetcache.conductor.precache.precacher import Precacher  # noqa: E402
from fleetcache.image.source import ImageMeta  # noqa: E402

IMAGE_ID = "1b5c4fd2-5a57-4c6e-9c6b-3f4b0c8a2f10"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--cells", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--jobs", type=int, default=2, help="measured jobs after the warm-up")
    parser.add_argument("--delay", type=float, default=0.12,
                        help="seconds each fake compute takes to answer (default: about "
                        "500 hosts a second at 64 calls at once, bench/fanout.py's pace)")
    parser.add_argument("--trace", action="store_true", help="tracemalloc snapshots")
    parser.add_argument("--trim", action="store_true",
                        help="glibc's malloc_trim(0) after each job, before VmRSS is read (a "
                        "diagnostic: what of the resident size is free memory glibc kept)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--database", help=argparse.SUPPRESS)
    parser.add_argument("--aggregate", type=int, help=argparse.SUPPRESS)
    return parse_with_smoke(parser, {"hosts": [200], "cells": 2, "jobs": 1})


def vm_status() -> dict[str, float]:
    """VmRSS and VmHWM of this process, in MiB."""
    out = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) / 1024
    return out


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def allocators() -> dict[str, float]:
    """Who holds the memory, in MiB: glibc's heap (``mallinfo2``: obtained from the system,
    in use, free but kept), CPython's small-object allocator (``sys._debugmallocstats``: its
    arenas, and the blocks in use in them) and SQLite's page caches and statements
    (``sqlite3_memory_used``, and its high-water mark)."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    sqlite = ctypes.CDLL(_sqlite3.__file__)
    sqlite.sqlite3_memory_used.restype = ctypes.c_int64
    sqlite.sqlite3_memory_highwater.restype = ctypes.c_int64
    sqlite.sqlite3_memory_highwater.argtypes = [ctypes.c_int]
    out = {
        "glibc_system": (info.arena + info.hblkhd) / 2**20,
        "glibc_in_use": (info.uordblks + info.hblkhd) / 2**20,
        "glibc_free_kept": info.fordblks / 2**20,
        "sqlite_used": sqlite.sqlite3_memory_used() / 2**20,
        "sqlite_highwater": sqlite.sqlite3_memory_highwater(0) / 2**20,
    }
    if not tracemalloc.is_tracing():  # its hooks hide the small-object allocator's stats
        out.update(_pymalloc())
    return out


def _pymalloc() -> dict[str, float]:
    """Parse ``sys._debugmallocstats()`` (written to the C stderr)."""
    with tempfile.TemporaryFile(mode="w+") as buf:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(buf.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        buf.seek(0)
        text = buf.read()
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if value.strip().replace(",", "").isdigit():
            fields[key.strip()] = int(value.strip().replace(",", ""))
    return {"pymalloc_arenas": fields.get("# arenas allocated current", 0) * _ARENA / 2**20,
            "pymalloc_in_use": fields.get("# bytes in allocated blocks", 0) / 2**20}


#: CPython 3.10+'s small-object arena size (``ARENA_SIZE`` with radix-tree arenas: 1 MiB).
_ARENA = 1 << 20


def trim(wanted: bool) -> None:
    """Have glibc give its free memory back to the system (``malloc_trim(0)``)."""
    if wanted:
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def reset_peak() -> None:
    """Start ``VmHWM`` again from the current resident size (Linux 4.0+), so that each job's
    peak is its own."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


class FakeImages:
    def show(self, ctxt: Any, image_id: str) -> ImageMeta:
        return ImageMeta(id=image_id, disk_format="raw")


class FakeComputes:
    """Every host already holds every image."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def compute_api(self, cell: Any) -> FakeComputes:
        return self

    def cache_images(self, ctxt: Any, host: str, image_ids: list[str],
                     pin_until: float | None = None) -> dict[str, Any]:
        time.sleep(self.delay)
        return {i: {"state": "existing", "reason": None, "bytes_downloaded": 0}
                for i in image_ids}


class EncodingNotifier:
    """Encodes each notification as the wire would, and keeps only the largest size."""

    def __init__(self) -> None:
        self.largest: dict[str, int] = {}

    def info(self, ctxt: Any, event_type: str, payload: dict[str, Any]) -> None:
        size = len(json.dumps({"event_type": event_type, "payload": payload}))
        self.largest[event_type] = max(size, self.largest.get(event_type, 0))


#: What a job calls once (or once a page) whose transient allocations are measured: module,
#: attribute name.
MEASURED_CALLS = (
    (db_aggregates, "aggregate_get"), (jobs, "job_create"), (jobs, "job_set_state"),
    (jobs, "job_record_hosts"), (job_leases, "job_end_first_pass"),
    (Precacher, "plan_hosts"), (notifications.CacheNotifier, "start"),
    (notifications.CacheNotifier, "end"),
)


def measure_calls(peaks: dict[str, float]) -> None:
    """Wrap :data:`MEASURED_CALLS` so that each records the most Python memory it held at
    once above what was allocated when it was called (``tracemalloc``'s peak, reset at the
    call: other threads' allocations in the meantime count too)."""
    for owner, name in MEASURED_CALLS:
        original = getattr(owner, name)

        def wrapped(*args: Any, __original: Any = original, __name: str = name,
                    **kwargs: Any) -> Any:
            if not tracemalloc.is_tracing():
                return __original(*args, **kwargs)
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            try:
                return __original(*args, **kwargs)
            finally:
                held = (tracemalloc.get_traced_memory()[1] - before) / 2**20
                peaks[__name] = max(held, peaks.get(__name, 0.0))

        setattr(owner, name, wrapped)


class Watch:
    """Follows the running job: the writer's longest queue, and tracemalloc snapshots when
    50 % and 90 % of its hosts are done."""

    def __init__(self, trace: bool) -> None:
        self.trace = trace
        self.job: precache.PrecacheJob | None = None
        self.max_queue = 0
        self.snapshots: dict[str, tracemalloc.Snapshot] = {}
        self._stop = threading.Event()
        original = precache.PrecacheJob.__init__

        def capture(job: precache.PrecacheJob, *args: Any, **kwargs: Any) -> None:
            original(job, *args, **kwargs)
            self.job = job

        precache.PrecacheJob.__init__ = capture  # type: ignore[method-assign]

    def follow(self, total: int, snapshot: bool) -> threading.Thread:
        self._stop.clear()
        marks = [(0.5, "50 %"), (0.9, "90 %")] if snapshot and self.trace else []

        def run() -> None:
            while not self._stop.wait(0.02):
                job = self.job
                if job is None:
                    continue
                self.max_queue = max(self.max_queue, job.writer._queue.qsize())
                while marks and job.stats.hosts_done >= marks[0][0] * total:
                    self.snapshots[marks.pop(0)[1]] = tracemalloc.take_snapshot()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def stop(self, thread: threading.Thread) -> None:
        self._stop.set()
        thread.join()
        self.job = None


def make_database(tmp: Path, hosts: int, cells: int) -> tuple[str, int]:
    """A SQLite file with ``hosts`` compute services over ``cells`` cells and an aggregate
    over them all (built by the parent, so that the child's memory is the job's alone).

    :returns: its URL and the aggregate's id.
    """
    db_url = f"sqlite:///{tmp / f'fleetcache-{hosts}.sqlite'}"
    plan = [Cell(f"cell{i + 1}", f"fake:///cell{i + 1}", []) for i in range(cells)]
    for i in range(hosts):
        plan[i % cells].hosts.append(f"fcbench-{i:05d}")
    return db_url, setup_database(db_url, plan, "fcbench")


def job_state(db: Database, uuid: str) -> str:
    """The job's state alone, which is what the wait needs.

    NOTE: polling ``jobs.job_progress_recent`` (which counts the job's results) every 0.05 s
    was most of this process's CPU, and grew with the hosts (docs/performance.md, "The
    pre-cache job's own CPU per host")."""
    with db.transaction() as session:
        return str(session.scalar(
            select(models.CacheJob.state).where(models.CacheJob.uuid == uuid)))


def one(args: argparse.Namespace, hosts: int) -> dict[str, Any]:
    db_url, aggregate_id = args.database, args.aggregate
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    rpc.register_opts(conf)
    conf([], project="fleetcache", default_config_files=[])
    conf.set_override("service_down_time", 86400)
    db = Database(db_url, max_pool_size=40)
    host_calls = HostCallPool(args.concurrency)
    coordinators = futurist.ThreadPoolExecutor(max_workers=2)
    notifier = EncodingNotifier()
    precacher = Precacher(
        conf, db, "conductor1", clients=FakeComputes(args.delay),  # type: ignore[arg-type]
        notifier=notifications.CacheNotifier(notifier), host_calls=host_calls,
        job_runner=coordinators.submit, images=FakeImages(),  # type: ignore[arg-type]
    )
    watch = Watch(args.trace)
    out: dict[str, Any] = {"hosts": hosts, "rss": [], "walls": [], "cpu_ms": [],
                           "call_peaks": {}}
    if args.trace:
        measure_calls(out["call_peaks"])
    out["rss_start"] = vm_status()["VmRSS"]  # the code is imported, the pools are built
    start_allocators = allocators()

    def run_job(snapshot: bool) -> None:
        follower = watch.follow(hosts, snapshot)
        started, cpu = time.monotonic(), time.process_time()
        uuid = precacher.start(get_admin_context(), aggregate_id, [IMAGE_ID])["uuid"]
        polling = 0.0
        while True:
            time.sleep(0.05)
            polled = time.thread_time()
            state = job_state(db, uuid)
            polling += time.thread_time() - polled
            if state in (jobs.DONE, jobs.FAILED):
                break
        out["walls"].append(time.monotonic() - started)
        out["cpu_ms"].append((time.process_time() - cpu - polling) / hosts * 1000)
        # the database counts the results: none is loaded into this process
        final = jobs.job_progress_recent(db, 1)[0]
        watch.stop(follower)
        if (final["uuid"] != uuid or final["state"] != jobs.DONE
                or final["hosts_reported"] != hosts or final["counts"]["existing"] != hosts):
            raise RuntimeError(f"job {uuid} ended as {final}, expected {hosts} existing")

    out["hwm_jobs"] = []
    reset_peak()
    run_job(False)
    gc.collect()
    trim(args.trim)
    out["rss"].append(vm_status()["VmRSS"])
    out["hwm_jobs"].append(vm_status()["VmHWM"])
    out["allocators_start"] = start_allocators
    out["allocators"] = [allocators()]
    if args.trace:
        tracemalloc.start(1)
        base = tracemalloc.take_snapshot()
    for n in range(args.jobs):
        reset_peak()
        run_job(n == args.jobs - 1)
        gc.collect()
        trim(args.trim)
        out["rss"].append(vm_status()["VmRSS"])
        out["hwm_jobs"].append(vm_status()["VmHWM"])
        out["allocators"].append(allocators())
    # Each SQLite connection has a page cache of its own (``PRAGMA cache_size``): how many
    # the pool opened tells how many caches the job's threads filled.
    out["db_connections"] = db.engine.pool.checkedin()
    out["hwm"] = max(out["hwm_jobs"])
    out["writer_max_queue"] = watch.max_queue
    out["largest_notification"] = notifier.largest
    if args.trace:
        watch.snapshots["after"] = tracemalloc.take_snapshot()
        out["top"] = {}
        for name, snap in watch.snapshots.items():
            stats = snap.compare_to(base, "lineno")
            out["top"][name] = {
                "total_diff_mib": sum(s.size_diff for s in stats) / 2**20,
                "lines": [(str(s.traceback), s.size_diff, s.count_diff) for s in stats[:12]],
            }
        tracemalloc.stop()
    host_calls.shutdown(wait=False, cancel_futures=True)
    coordinators.shutdown(wait=True)
    db.dispose()
    return out


def report(result: dict[str, Any]) -> None:
    rss = " ".join(f"{r:.1f}" for r in result["rss"])
    print(f"hosts={result['hosts']}: VmRSS start {result['rss_start']:.1f} MiB, after warm-up "
          f"and each job {rss} MiB, VmHWM during each "
          f"{' '.join(f'{r:.1f}' for r in result['hwm_jobs'])} MiB; job walls "
          f"{' '.join(f'{w:.1f}' for w in result['walls'])} s; process CPU per host "
          f"{' '.join(f'{c:.3f}' for c in result['cpu_ms'])} ms; writer's longest queue "
          f"{result['writer_max_queue']}; database connections opened "
          f"{result['db_connections']}; largest notification bytes "
          f"{result['largest_notification']}")
    for name in result["allocators_start"]:
        values = [result["allocators_start"][name]] + [a.get(name, float("nan"))
                                                       for a in result["allocators"]]
        print(f"  {name}: {' '.join(f'{v:.1f}' for v in values)} MiB (start, after warm-up "
              "and each job)")
    if "top" in result:
        peaks = ", ".join(f"{name} {mib:.2f}" for name, mib in
                          sorted(result["call_peaks"].items(), key=lambda kv: -kv[1]))
        print(f"  most Python memory held at once during a call, MiB: {peaks}")
        for name, top in result["top"].items():
            print(f"  live Python allocations at {name} against before the measured jobs: "
                  f"{top['total_diff_mib']:+.2f} MiB")
            for where, size, count in top["lines"]:
                print(f"    {size / 1024:+10.1f} KiB {count:+8d} blocks  {where}")


def main() -> int:
    args = parse_args()
    if args.one is not None:
        print(json.dumps(one(args, args.one)))
        return 0
    log(f"conductor_memory: hosts {args.hosts}, load {loadavg()}")
    tmp = Path(tempfile.mkdtemp(prefix="fcbench-mem-"))
    for hosts in args.hosts:
        db_url, aggregate_id = make_database(tmp, hosts, args.cells)
        cmd = [sys.executable, __file__, "--one", str(hosts), "--cells", str(args.cells),
               "--database", db_url, "--aggregate", str(aggregate_id),
               "--concurrency", str(args.concurrency), "--jobs", str(args.jobs),
               "--delay", str(args.delay)] + (["--trace"] if args.trace else []) + (
                   ["--trim"] if args.trim else [])
        done = subprocess.run(cmd, check=True, capture_output=True, text=True,
                              env={**os.environ, "PYTHONWARNINGS": "ignore"})
        report(json.loads(done.stdout.strip().splitlines()[-1]))
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"load {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
