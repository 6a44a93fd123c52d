#!/usr/bin/env python3
"""What the conductor's Prometheus metrics add to the pre-cache fan-out's per-host path.

For ``--hosts`` finished hosts of ``--images`` images each, in the same process and rounds,
in rotating order:

* baseline: the bookkeeping the job does per host without metrics (``JobStats.add_host``, the
  job's own counts under its lock);
* metrics: the same plus what :class:`fleetcache.conductor.metrics.ConductorMetrics` does per
  host (the in-flight gauge up and down around the call, ``record_host`` on the results).

The RPC call, the database write and the notification (the bulk of a host's cost) are left
out of both, so the ratio overstates what metrics add to a real host.

Prints the median and worst round of each and last the headline
``metrics_hooks: hosts=N ... us_per_host=U ratio=R``, R = metrics over baseline.

Run: ``.venv/bin/python bench/metrics_hooks.py [--hosts 1000 --images 3 --rounds 15]``
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import headline, loadavg, log, median, parse_with_smoke  # noqa: E402

from fleetcache.compute.rpcapi import ImageResult  # noqa: E402
from fleetcache.conductor.metrics import ConductorMetrics  # noqa: E402
from fleetcache.conductor.precache.results import JobStats  # noqa: E402


def _results(images: int) -> dict[str, ImageResult]:
    return {f"image-{n}": ImageResult(state="cached", reason=None, bytes_downloaded=1 << 20,
                                      download_path="http", fallback_reason=None)
            for n in range(images)}


def _baseline(hosts: int, results: dict[str, ImageResult]) -> float:
    stats, lock = JobStats(), threading.Lock()
    start = time.perf_counter()
    for _ in range(hosts):
        with lock:
            stats.add_host(results)
    return time.perf_counter() - start


def _with_metrics(hosts: int, results: dict[str, ImageResult]) -> float:
    stats, lock = JobStats(), threading.Lock()
    metrics = ConductorMetrics(CollectorRegistry())
    start = time.perf_counter()
    for _ in range(hosts):
        metrics.in_flight.inc()
        metrics.in_flight.dec()
        with lock:
            stats.add_host(results)
            metrics.record_host(results)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--images", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=15)
    args = parse_with_smoke(parser, {"hosts": 100, "rounds": 1})
    results = _results(args.images)
    paths: dict[str, Callable[[int, dict[str, ImageResult]], float]] = {
        "baseline": _baseline, "metrics": _with_metrics}
    times: dict[str, list[float]] = {name: [] for name in paths}
    log(f"load {loadavg()} before")
    for round_ in range(args.rounds):
        order = list(paths) if round_ % 2 == 0 else list(reversed(paths))
        for name in order:
            times[name].append(paths[name](args.hosts, results))
    log(f"load {loadavg()} after")
    for name, values in times.items():
        print(f"{name:9s} median {median(values) * 1e3:8.3f} ms  worst {max(values) * 1e3:8.3f} "
              f"ms  per {args.hosts} hosts")
    ratios = [m / b for m, b in zip(times["metrics"], times["baseline"], strict=True)]
    added = (median(times["metrics"]) - median(times["baseline"])) / args.hosts * 1e6
    print(f"worst round ratio {max(ratios):.3f}")
    print(headline("metrics_hooks", median(times["metrics"]) / median(times["baseline"]),
                   hosts=args.hosts, images=args.images, rounds=args.rounds,
                   us_per_host=added, load=loadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
