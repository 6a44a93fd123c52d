#!/usr/bin/env python3
"""Fan-out overhead of aggregate image pre-caching (issue 3), against a bare RPC baseline.

Builds a fleet of N fake computes in 2 cells on a private RabbitMQ node (tools/
rabbitmq-bench-node.sh: port 5674, raised fd limit), spread over processes of at most
``--servers-per-process`` agents. Then, in one run, alternating for ``--rounds`` rounds after
a warm-up:

* job: ``POST /v2.1/os-aggregates/{id}/images`` to the real ``fleetcache-api`` process, which
  asks the real ``fleetcache-conductor`` process, which calls every compute with
  ``[image_cache] precache_concurrency = C``. Timed from just before the POST to the job's
  ``finished_at`` (the conductor stamps it; same clock), confirmed by polling the job resource.
* bare calls (the baseline): a bare oslo.messaging client calling ``cache_images`` with the
  job's image once on every host through each cell's transport with a futurist pool of C
  workers.

Two modes, the fake computes answering the job and the bare calls alike in each:

* instant (default): every compute already holds the image and answers ``existing`` at once,
  so the conductor's CPU is the whole job. Targets, in every round: job wall <= 1.5 x the bare
  calls' wall, conductor CPU <= 2.5 ms per host.
* realistic (``--image-mib M --host-mbps B``): no compute holds the image, and each call
  sleeps M MiB / B Mbit/s, the download a real pre-cache waits for. Target, in every round:
  job wall <= 1.05 x the bare calls' (the fan-out adds nothing a person could see).

Prints each round's job wall beside the bare calls', their ratio and whether it meets the
target, the median and the worst round, the conductor's CPU per host, and last the headline
``fanout: ... ratio=R`` with R = median job wall / median bare calls' wall. A target missed
is printed as ``FAIL``, not an exit status: the figures depend on the machine's load.
``--smoke`` runs a tiny fleet once, to prove the bench still runs (no figure judged).

Run: ``.venv/bin/python bench/fanout.py --hosts 1000 --concurrency 64 [--image-mib 64
--host-mbps 1000]``
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
    parse_with_smoke,
    tree_cpu,
)
from _fleet import Shards, plan_cells, setup_database  # noqa: E402
from _meter import CpuMeter, self_cpu  # noqa: E402
from _services import ApiClient, RpcClient, Services  # noqa: E402

IMAGE_ID = "1b5c4fd2-5a57-4c6e-9c6b-3f4b0c8a2f10"
VHOST_PREFIX = "fcbench"
#: The issue's targets (issue 25): job wall / bare calls' wall, per round, per mode.
INSTANT_RATIO_TARGET = 1.5
REALISTIC_RATIO_TARGET = 1.05
#: Conductor CPU per host in the instant mode, ms, per round.
CPU_MS_TARGET = 2.5
#: ``--smoke``: a fleet just large enough to use both cells and the pool.
SMOKE: dict[str, object] = {"hosts": 4, "concurrency": 2, "rounds": 1}


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
    parser.add_argument("--image-mib", type=float, default=None,
                        help="the realistic mode: no compute holds the image, and each call "
                        "downloads this many MiB at --host-mbps")
    parser.add_argument("--host-mbps", type=float, default=1000.0,
                        help="each compute's download bandwidth in the realistic mode, Mbit/s")
    parser.add_argument("--profile", metavar="FILE",
                        help="record the conductor's on-CPU stacks during the measured rounds "
                        "with py-spy (collapsed stacks, flamegraph input) into FILE")
    parser.add_argument("--baseline-only", action="store_true",
                        help="measure only the baseline (harness check)")
    return parse_with_smoke(parser, SMOKE)


def download_seconds(args: argparse.Namespace) -> float | None:
    """How long one image's download lasts on a fake compute (``None``: the instant mode)."""
    if args.image_mib is None:
        return None
    return float(args.image_mib * 2**20 * 8 / (args.host_mbps * 1e6))


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
            hosts: int, expected: str, meter: CpuMeter | None = None) -> dict[str, float]:
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
    if counts.get(expected) != hosts:
        raise RuntimeError(f"expected {hosts} {expected}, got {counts}")
    inner = services.job_elapsed(location.rsplit("/", 1)[-1])
    return {"wall": finished_wall(job, started_utc), "polled": polled, "cpu": cpu,
            "inner": inner if inner is not None else float("nan"), "total_cpu": total_cpu}


class Targets:
    """The issue's targets for one mode, judged per round."""

    def __init__(self, realistic: bool, smoke: bool) -> None:
        self.ratio = REALISTIC_RATIO_TARGET if realistic else INSTANT_RATIO_TARGET
        self.cpu_ms = None if realistic else CPU_MS_TARGET
        self.smoke = smoke
        self.failed: list[str] = []

    def describe(self) -> str:
        cpu = f", conductor CPU <= {self.cpu_ms} ms per host" if self.cpu_ms else ""
        judged = " (smoke run: not judged)" if self.smoke else ""
        return f"target, every round: job wall <= {self.ratio}x the bare calls'{cpu}{judged}"

    def judge(self, rnd: int, ratio: float, cpu_ms: float) -> str:
        """``PASS``/``FAIL`` for round ``rnd`` (1-based), what failed remembered."""
        missed = []
        if ratio > self.ratio:
            missed.append(f"ratio {ratio:.3f} > {self.ratio}")
        if self.cpu_ms is not None and cpu_ms > self.cpu_ms:
            missed.append(f"conductor CPU {cpu_ms:.2f} ms > {self.cpu_ms} ms per host")
        if self.smoke:
            return "not judged"
        self.failed += [f"round {rnd}: {m}" for m in missed]
        return "FAIL (" + ", ".join(missed) + ")" if missed else "PASS"


def main() -> int:
    args = parse_args()
    exit_on_sigterm()
    seconds = download_seconds(args)
    mode = (f"realistic ({args.image_mib:g} MiB at {args.host_mbps:g} Mbit/s per host: "
            f"{seconds:.3f} s per call)" if seconds is not None
            else "instant (every compute holds the image)")
    expected = "existing" if seconds is None else "cached"
    tmp = Path(tempfile.mkdtemp(prefix="fcbench-fanout-"))
    db_url = args.database_url or f"sqlite:///{tmp / 'fleetcache.sqlite'}"
    log(f"fanout: {args.hosts} hosts, concurrency {args.concurrency}, {args.cells} cells, "
        f"{mode}, work dir {tmp}")
    targets = Targets(realistic=seconds is not None, smoke=args.smoke)
    load_before = loadavg()
    with broker(args.keep_broker, args.cells) as broker_url, contextlib.ExitStack() as stack:
        if not args.keep_workdir:
            stack.callback(shutil.rmtree, tmp, ignore_errors=True)
        cells = plan_cells(args.hosts, args.cells, broker_url, VHOST_PREFIX)
        aggregate_id = setup_database(db_url, cells, "fcbench")
        shards = Shards(cells, args.servers_per_process * args.hosts_per_server,
                        args.executor_pool, IMAGE_ID, args.hosts_per_server, seconds)
        stack.callback(shards.stop)
        shards.wait_ready(timeout=300)
        baseline = Baseline(cells, args.concurrency, [IMAGE_ID],
                            call_monitor_timeout=60 if args.baseline_call_monitor else None)
        stack.callback(baseline.cleanup)
        log(f"baseline warm-up: {baseline.run()[0]:.2f} s")
        services = None
        startup_memory = (0.0, 0.0)
        if not args.baseline_only:
            services = Services(tmp, broker_url + VHOST_PREFIX, db_url, args.concurrency,
                                IMAGE_ID, notifications=args.notifications)
            stack.callback(services.stop)
            services.start(api=args.entry == "api")
            api: ApiClient | RpcClient = (
                ApiClient(services.api_url) if args.entry == "api"
                else RpcClient(broker_url + VHOST_PREFIX, db_url))
            startup_memory = services.conductor_memory()
            warm = run_job(api, services, aggregate_id, args.hosts, expected)
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
            line = f"round {rnd + 1}: bare calls {base_walls[-1]:.2f} s"
            if services is not None:
                res = run_job(api, services, aggregate_id, args.hosts, expected, meter)
                job_walls.append(res["wall"])
                cpus.append(res["cpu"])
                rss_after.append(services.conductor_memory()[0])
                ratio, cpu_ms = res["wall"] / wall, res["cpu"] / args.hosts * 1000
                line += (f", job {res['wall']:.2f} s, ratio {ratio:.3f}, conductor CPU "
                         f"{cpu_ms:.2f} ms per host: {targets.judge(rnd + 1, ratio, cpu_ms)} "
                         f"(fan-out {res['inner']:.2f} s, polled {res['polled']:.2f} s, total "
                         f"CPU job/bare calls {res['total_cpu'] / base_total:.2f})")
            log(line)
        memory = services.conductor_memory() if services is not None else None
        smaps = services.conductor_smaps() if services is not None else {}
    base = median(base_walls)
    print(f"hosts={args.hosts} cells={args.cells} concurrency={args.concurrency} "
          f"processes={len(shards.procs)} rounds={args.rounds} db={db_url.split(':')[0]} "
          f"mode={mode} notifications={args.notifications} "
          f"baseline_call_monitor={args.baseline_call_monitor} "
          f"loadavg={load_before}->{loadavg()} "
          f"at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"bare calls (oslo.messaging): {' '.join(f'{w:.2f}' for w in base_walls)} s; "
          f"median {base:.2f} s = {args.hosts / base:.0f} calls/s; client CPU per host "
          f"{median(base_cpus) / args.hosts * 1000:.2f} ms")
    print(meter.table(args.hosts, ("baseline", "job")))
    if not job_walls:
        print(headline("fanout", 1.0, hosts=args.hosts, concurrency=args.concurrency,
                       baseline_s=base))
        return 0
    job = median(job_walls)
    ratios = [j / b for j, b in zip(job_walls, base_walls, strict=True)]
    cpus_ms = [c / args.hosts * 1000 for c in cpus]
    worst = max(range(len(ratios)), key=ratios.__getitem__)
    path = "API -> conductor" if args.entry == "api" else "RPC -> conductor"
    print(f"job ({path} -> computes): {' '.join(f'{w:.2f}' for w in job_walls)} s; "
          f"median {job:.2f} s = {args.hosts / job:.0f} hosts/s")
    print("job / bare calls per round: " + " ".join(f"{r:.3f}" for r in ratios)
          + f"; median {median(ratios):.3f}, worst {ratios[worst]:.3f} (round {worst + 1})")
    print(f"conductor CPU per host: {median(cpus_ms):.2f} ms median, worst "
          f"{max(cpus_ms):.2f} ms ({len(cpus)} jobs)")
    assert memory is not None
    print(f"conductor memory after the last job: RSS {memory[0]:.0f} MiB, peak {memory[1]:.0f} MiB"
          f" (at start-up, before the warm-up job: RSS {startup_memory[0]:.0f} MiB; after each "
          f"measured job: {' '.join(f'{r:.0f}' for r in rss_after)} MiB)")
    print("conductor resident memory after the last job by region: "
          + ", ".join(f"{kind} {mib:.1f}" for kind, mib in smaps.items()) + " MiB")
    print(targets.describe())
    verdict = ("not judged" if args.smoke else "FAIL: " + "; ".join(targets.failed)
               if targets.failed else "PASS")
    print(f"target: {verdict}")
    print(headline("fanout", job / base, hosts=args.hosts, concurrency=args.concurrency,
                   mode="instant" if seconds is None else "realistic",
                   job_s=job, baseline_s=base, worst_round_ratio=ratios[worst],
                   conductor_cpu_ms_per_host=median(cpus_ms),
                   conductor_rss_mib=round(memory[0]), conductor_peak_mib=round(memory[1]),
                   target="smoke" if args.smoke else "fail" if targets.failed else "pass"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
