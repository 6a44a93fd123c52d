#!/usr/bin/env python3
"""Fan-out overhead of aggregate image pre-caching (issue 3), against a bare RPC baseline.

Builds a fleet of N fake computes in 2 cells on a private RabbitMQ node (tools/
rabbitmq-bench-node.sh: port 5674, raised fd limit), spread over processes of at most
``--servers-per-process`` agents, all of which already hold one image. Then, in one run,
alternating for ``--rounds`` rounds after a warm-up:

* job: ``POST /v2.1/os-aggregates/{id}/images`` to the real ``fleetcache-api`` process, which
  asks the real ``fleetcache-conductor`` process, which calls every compute with
  ``[image_cache] precache_concurrency = C``. Timed from just before the POST to the job's
  ``finished_at`` (the conductor stamps it; same clock), confirmed by polling the job resource.
* baseline: a bare oslo.messaging client calling ``cache_images(image_ids=[])`` once on every
  host through each cell's transport with a futurist pool of C workers.

Prints the medians side by side, the conductor's CPU per host, and last the headline
``fanout: ... ratio=R`` with R = job wall / baseline wall.

Run: ``.venv/bin/python bench/fanout.py --hosts 1000 --concurrency 64``
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# eventlet (pulled in by oslo.service) warns in every process; nothing here uses it.
os.environ.setdefault("PYTHONWARNINGS", "ignore")
warnings.simplefilter("ignore")

from _baseline import Baseline  # noqa: E402
from _benchlib import (  # noqa: E402
    BROKER_SCRIPT,
    broker_fd_limit,
    broker_pid,
    broker_start,
    broker_stop,
    cpu_seconds,
    exit_on_sigterm,
    headline,
    loadavg,
    log,
    median,
    tree_cpu,
)
from _fleet import Shards, plan_cells, setup_database  # noqa: E402
from _lean_floor import LeanFloor  # noqa: E402
from _meter import CpuMeter, self_cpu  # noqa: E402
from _services import ApiClient, RpcClient, Services  # noqa: E402

IMAGE_ID = "1b5c4fd2-5a57-4c6e-9c6b-3f4b0c8a2f10"
VHOST_PREFIX = "fcbench"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=16,
                        help="[image_cache] precache_concurrency, and the baseline's pool")
    parser.add_argument("--cells", type=int, default=2)
    parser.add_argument("--servers-per-process", type=int, default=100)
    parser.add_argument("--hosts-per-server", type=int, default=1,
                        help="hosts whose queues one fake compute's RPC server consumes (the "
                        "scale mode: 10,000 hosts cannot each have a server of their own here)")
    parser.add_argument("--executor-pool", type=int, default=2,
                        help="executor_thread_pool_size of each fake compute's RPC server")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", default=None,
                        help="default: a SQLite file in the run's temporary directory")
    parser.add_argument("--keep-broker", action="store_true",
                        help="leave the bench RabbitMQ node running afterwards")
    parser.add_argument("--entry", choices=("api", "rpc"), default="api",
                        help="send the request to the API (the real path) or straight to the "
                        "conductor over RPC (to tell the API's share apart)")
    parser.add_argument("--keep-workdir", action="store_true",
                        help="keep the run's directory (daemon logs, config, SQLite file)")
    parser.add_argument("--notifications", choices=("messagingv2", "noop"),
                        default="messagingv2",
                        help="the conductor's notification driver (noop: to measure their cost)")
    parser.add_argument("--baseline-call-monitor", action="store_true",
                        help="give the baseline's calls the conductor's call_monitor_timeout "
                        "(the compute then runs a watchdog thread per call)")
    parser.add_argument("--oslo-calls", action="store_true",
                        help="the conductor calls the computes and sends its notifications "
                             "through oslo.messaging's client ([conductor] "
                             "lean_compute_calls = false), as before issue 12's lean caller")
    parser.add_argument("--profile", metavar="FILE",
                        help="record the conductor's on-CPU stacks during the measured rounds "
                        "with py-spy (collapsed stacks, flamegraph input) into FILE")
    parser.add_argument("--lean-floor", action="store_true",
                        help="also call every host once per round straight through py-amqp "
                        "(bench/_lean_floor.py): what the calls cost without oslo.messaging's "
                        "client, a diagnostic of the floor")
    parser.add_argument("--baseline-only", action="store_true",
                        help="measure only the baseline (harness check)")
    return parser.parse_args()


@contextlib.contextmanager
def broker(keep: bool, cells: int) -> Iterator[str]:
    vhosts = [VHOST_PREFIX] + [f"{VHOST_PREFIX}_cell{i + 1}" for i in range(cells)]
    url = broker_start(vhosts)
    # Notifications of earlier runs nobody consumed (--keep-broker): start from an empty queue.
    subprocess.run([str(BROKER_SCRIPT), "ctl", "purge_queue", "-p", VHOST_PREFIX,
                    "notifications.info"], capture_output=True, check=False)
    log(f"bench broker {url} ({broker_fd_limit()})")
    try:
        yield url
    finally:
        if not keep:
            broker_stop()


@contextlib.contextmanager
def profiler(pid: int, output: str) -> Iterator[None]:
    """py-spy (``$PY_SPY``, on PATH or beside this Python) sampling ``pid`` at 100 Hz while
    the block runs, only the thread holding the GIL (what costs CPU in Python)."""
    binary = (os.environ.get("PY_SPY") or shutil.which("py-spy")
              or shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy")
    proc = subprocess.Popen([binary, "record", "--pid", str(pid), "--rate", "100",
                             "--format", "raw", "--nonblocking", "--gil", "--output", output],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        log(f"conductor profile in {output}")


def finished_wall(job: dict[str, object], started_utc: datetime.datetime) -> float:
    finished = datetime.datetime.fromisoformat(str(job["finished_at"]).rstrip("Z"))
    return (finished.replace(tzinfo=None) - started_utc).total_seconds()


def run_job(api: ApiClient | RpcClient, services: Services, aggregate_id: int,
            hosts: int, meter: CpuMeter | None = None) -> dict[str, float]:
    """One pre-cache job through the API; its wall time and the conductor's CPU."""
    cpu_before = services.conductor_cpu()
    before = meter.snapshot() if meter is not None else {}
    started_utc = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    started = time.monotonic()
    location = api.cache_images(aggregate_id, [IMAGE_ID])
    job = api.wait_job(location, timeout=600)
    polled = time.monotonic() - started
    cpu = services.conductor_cpu() - cpu_before
    total_cpu = sum(meter.record("job", before).values()) if meter is not None else 0.0
    if job["state"] != "done":
        raise RuntimeError(f"job ended {job['state']}: {job.get('error')}")
    counts = api.counts(job)
    if counts.get("existing") != hosts:
        raise RuntimeError(f"expected {hosts} existing, got {counts}")
    inner = services.job_elapsed(location.rsplit("/", 1)[-1])
    return {"wall": finished_wall(job, started_utc), "polled": polled, "cpu": cpu,
            "inner": inner if inner is not None else float("nan"), "total_cpu": total_cpu}


def main() -> int:
    args = parse_args()
    exit_on_sigterm()
    tmp = Path(tempfile.mkdtemp(prefix="fcbench-fanout-"))
    db_url = args.database_url or f"sqlite:///{tmp / 'fleetcache.sqlite'}"
    log(f"fanout: {args.hosts} hosts, concurrency {args.concurrency}, {args.cells} cells, "
        f"work dir {tmp}")
    load_before = loadavg()
    with broker(args.keep_broker, args.cells) as broker_url, contextlib.ExitStack() as stack:
        if not args.keep_workdir:
            stack.callback(shutil.rmtree, tmp, ignore_errors=True)
        cells = plan_cells(args.hosts, args.cells, broker_url, VHOST_PREFIX)
        aggregate_id = setup_database(db_url, cells, "fcbench")
        shards = Shards(cells, args.servers_per_process * args.hosts_per_server,
                        args.executor_pool, IMAGE_ID, args.hosts_per_server)
        stack.callback(shards.stop)
        shards.wait_ready(timeout=300)
        baseline = Baseline(cells, args.concurrency,
                            call_monitor_timeout=60 if args.baseline_call_monitor else None)
        stack.callback(baseline.cleanup)
        log(f"baseline warm-up: {baseline.run()[0]:.2f} s")
        lean = None
        if args.lean_floor:
            lean = LeanFloor(cells, args.concurrency)
            stack.callback(lean.cleanup)
            log(f"lean floor warm-up: {lean.run()[0]:.2f} s")
        services = None
        startup_memory = (0.0, 0.0)
        if not args.baseline_only:
            services = Services(tmp, broker_url + VHOST_PREFIX, db_url, args.concurrency,
                                IMAGE_ID, notifications=args.notifications,
                                lean_calls=not args.oslo_calls)
            stack.callback(services.stop)
            services.start(api=args.entry == "api")
            api: ApiClient | RpcClient = (
                ApiClient(services.api_url) if args.entry == "api"
                else RpcClient(broker_url + VHOST_PREFIX, db_url))
            startup_memory = services.conductor_memory()
            warm = run_job(api, services, aggregate_id, args.hosts)
            log(f"job warm-up: {warm['wall']:.2f} s")
        meter = CpuMeter()
        meter.add("client", self_cpu)
        meter.add("computes", lambda: sum(cpu_seconds(p) for p in shards.pids()))
        bpid = broker_pid()
        if bpid is not None:
            meter.add("broker", lambda: cpu_seconds(bpid))
        if services is not None:
            meter.add("conductor", services.conductor_cpu)
            if services.api is not None:
                api_pid = services.api.pid
                meter.add("api", lambda: tree_cpu(api_pid))
        if args.profile and services is not None:
            stack.enter_context(profiler(services.conductor_pid(), args.profile))
        base_walls, base_cpus, job_walls, cpus = [], [], [], []
        rss_after: list[float] = []
        for rnd in range(args.rounds):
            before = meter.snapshot()
            wall, cpu = baseline.run()
            base_total = sum(meter.record("baseline", before).values())
            base_walls.append(wall)
            base_cpus.append(cpu)
            line = f"round {rnd + 1}: baseline {base_walls[-1]:.2f} s"
            if services is not None:
                res = run_job(api, services, aggregate_id, args.hosts, meter)
                job_walls.append(res["wall"])
                cpus.append(res["cpu"])
                rss_after.append(services.conductor_memory()[0])
                line += (f", job {res['wall']:.2f} s (fan-out {res['inner']:.2f} s, polled "
                         f"{res['polled']:.2f} s, conductor CPU {res['cpu']:.2f} s, total CPU "
                         f"job/baseline {res['total_cpu'] / base_total:.2f})")
            if lean is not None:
                before = meter.snapshot()
                lean_wall, _ = lean.run()
                meter.record("lean floor", before)
                line += f", lean floor {lean_wall:.2f} s"
            log(line)
        memory = services.conductor_memory() if services is not None else None
        smaps = services.conductor_smaps() if services is not None else {}
    base = median(base_walls)
    print(f"hosts={args.hosts} cells={args.cells} concurrency={args.concurrency} "
          f"processes={len(shards.procs)} rounds={args.rounds} db={db_url.split(':')[0]} "
          f"notifications={args.notifications} oslo_calls={args.oslo_calls} "
          f"baseline_call_monitor={args.baseline_call_monitor} "
          f"loadavg={load_before}->{loadavg()} "
          f"at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"baseline (bare oslo.messaging): {' '.join(f'{w:.2f}' for w in base_walls)} s; "
          f"median {base:.2f} s = {args.hosts / base:.0f} calls/s; client CPU per host "
          f"{median(base_cpus) / args.hosts * 1000:.2f} ms")
    print(meter.table(args.hosts, ("baseline", "job", "lean floor")))
    if not job_walls:
        print(headline("fanout", 1.0, hosts=args.hosts, concurrency=args.concurrency,
                       baseline_s=base))
        return 0
    job = median(job_walls)
    cpu_ms = median(cpus) / args.hosts * 1000
    path = "API -> conductor" if args.entry == "api" else "RPC -> conductor"
    print(f"job ({path} -> computes): {' '.join(f'{w:.2f}' for w in job_walls)} s; "
          f"median {job:.2f} s = {args.hosts / job:.0f} hosts/s")
    print(f"conductor CPU per host: {cpu_ms:.2f} ms (median of {len(cpus)} jobs)")
    assert memory is not None
    print(f"conductor memory after the last job: RSS {memory[0]:.0f} MiB, peak {memory[1]:.0f} MiB"
          f" (at start-up, before the warm-up job: RSS {startup_memory[0]:.0f} MiB; after each "
          f"measured job: {' '.join(f'{r:.0f}' for r in rss_after)} MiB)")
    print("conductor resident memory after the last job by region: "
          + ", ".join(f"{kind} {mib:.1f}" for kind, mib in smaps.items()) + " MiB")
    print(headline("fanout", job / base, hosts=args.hosts, concurrency=args.concurrency,
                   job_s=job, baseline_s=base, conductor_cpu_ms_per_host=cpu_ms,
                   conductor_rss_mib=round(memory[0]), conductor_peak_mib=round(memory[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
