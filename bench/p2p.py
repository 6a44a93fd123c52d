#!/usr/bin/env python3
"""Peer distribution (issue 22): time to all hosts and origin bytes, origin-only beside
store-and-forward and cut-through, N computes' real data planes behind a thin link to the
image service.

What runs (one process each, :mod:`multiprocessing` spawn):

* **the origin** (:mod:`p2p_origin`): a small Glance stand-in serving ``GET
  /v2/images/<id>`` (JSON with ``size``, ``disk_format``, ``os_hash_algo`` sha512,
  ``os_hash_value``) and ``GET /v2/images/<id>/file`` (200, or 206 for ``Range: bytes=N-``),
  one file of random bytes served under a fresh image id per point; it logs the bytes of
  every body it sent;
* **N computes** (:mod:`p2p_hosts`): each a real ``ComputeManager`` on a real ``DiskDriver``
  (the real ``ImageCache``: one-pass size + sha512 verification, ``O_DIRECT`` write, fsync,
  publish), a real ``PeerServer`` and ``ServeGrants``, the real ``GlanceImageSource``
  pointed at the origin. The driver (this process) calls their ``cache_images`` and
  ``serve_images`` over a pipe in place of the RPC bus;
* **the control plane**: the real ``PeerPlanner`` of the conductor, driven here as the
  conductor's pre-cache job drives it: for each host, in the job's order, all at once
  (``precache_concurrency`` >= N), ``assign`` (with the host's client, as the job's host
  call does: with cut-through the planner's ``serve_images`` makes it a source of its
  download at once), then the host's ``cache_images`` with the assigned peers, then
  ``finished`` with a client whose ``serve_images`` asks that host to pin the image and open
  the job's grant.

Modes, side by side in each round of the same run (their order rotates):

* ``origin-only``: every host from the origin (the baseline: fleetcache without peers);
* ``store-and-forward``: the planner with ``[image_cache] peer_cut_through = False``
  (``peer_max_uploads`` = 1 by default: holders double per round);
* ``cut-through``: the planner with ``peer_cut_through = True`` (the default): a host is a
  source from the start of its download, its image server streaming the download as it is
  written; with one upload per source the hosts of a group form a chain.

The computes are the same in all three (``peer_cut_through`` on: a compute streams only what
the planner asked it to serve before its download).

Links (``--tier``, :mod:`p2p_links`):

* ``A`` (default; root, iproute2, a kernel with network namespaces, veth, bridge and the tbf
  qdisc): one network namespace per compute, one for the origin, one holding a bridge per
  peer group; each compute joined to its group's bridge by a veth with ``tc ... tbf rate
  B_h`` on both ends (its upload and download); the origin joined to each group's bridge by
  its own veth with ``tbf rate B_o`` on the origin's end: each group (a site) has its own
  thin uplink to the image service. The namespaces are named ``fcp<pid>-...`` and deleted on
  every exit path (finally, atexit, SIGTERM/SIGINT). No fallback: when Tier A cannot be set
  up, the run stops and says why.
* ``B`` (no root, lower fidelity; only when asked): everything on loopback, the origin's
  egress per group through fleetcache's ``TokenBucket`` at B_o, each compute's uploads under
  ``[image_cache] max_upload_bytes_per_second`` and its downloads under
  ``max_download_bytes_per_second`` at B_h. It checks the accounting and the shape of the
  schedule, not the network (no shared link, no TCP dynamics on a shaped queue).

Counted per point (mode, N, groups, round): T(N), the time from the job's start until every
host holds the image; p50 and p99 of the per-host completion times (nearest rank); origin
bytes in copies of S per group, **counted in independent ways that must agree**: the
origin's own log of the body bytes it sent (its TCP's count, :mod:`p2p_origin`), the sum
over the hosts' results
(``cache_images``: ``bytes_downloaded`` less ``bytes_from_peers``) and, with Tier A, the
origin veth's tbf counter (``tc -s qdisc``) and its ``tx_bytes`` (bytes with headers: ``tc``
counts each wire segment's, so it must be the log times 1514/1448, a full segment's TCP/IP
overhead, within 1 %; a veth counts a GSO packet once with one header, so ``tx_bytes`` must
lie between the log and that); peer bytes (the receivers' ``bytes_from_peers`` beside the
sources' uploads); the largest number of uploads one source had in flight at once; CPU: the
bench's processes and the whole machine (``/proc/stat``) as a share of its cores. A point
where the machine was busier than 70 % of its cores is **INVALID** (CPU, not the link, may
have been the bound): printed, never judged.

Targets (judged on the median round; the worst round beside it; :mod:`p2p_report`):

* origin bytes <= 1.05 copies per group (store-and-forward and cut-through);
* cut-through T(N) <= 1.3 x (S/B_o + S/B_h), and T(largest N) / T(smallest N) <= 1.5 in
  each number of groups (the issue's: T(32) / T(2));
* store-and-forward T(N) <= 1.2 x (S/B_o + ceil(log2(N/G)) x S/B_h), the issue's bound. With
  ``peer_max_uploads`` = k > 1 the planner's own model is different: a source serves k
  receivers at B_h/k each, so each round takes k S/B_h and holders grow (k+1)-fold: T ~
  S/B_o + k ceil(log_(k+1)(N/G)) x S/B_h at most, printed beside (informative);
* origin-only beside, so the gain is a ratio from the same run (expected T ~ (N/G) S/B_o).

Faults (``--faults kill stall liar``, :mod:`p2p_faults`): in the same run, after each
round's fault-free points, the same modes (``--fault-modes``) with one source of group 0
faulty: the group's first holder killed (the host dies: its server and its own download)
or stalled once it has sent S/2 bytes, or lying (one byte flipped per piece it uploads).
``--peer-stall-timeout`` sets the computes' ``peer_stall_timeout`` for every point of the
run (the fault-free ones included), and
``--fault-stall`` how long a stalled source sends nothing. Reported per fault point beside
the fault-free median: T, origin copies per group (the same counts, which must agree), the
hosts that used the origin and why, ``bad_peers`` and the planner's quarantine, each resume
with its re-fetched bytes (at most one chunk), and each host's base hashed (no partial file
left). The host calls are the conductor's with computes of RPC 1.7: refused peer bytes, and an
image whose peers all failed (its bytes kept), come back and the planner names the next
source (one victim the origin, the others a peer),
so a liar costs its group a second copy; no peer can prove its bytes before the image's end
(the image service gives no piece hashes), so that case exceeds 1.05 copies per group by
design, and is reported as it is.

The last line is the headline ``p2p: ... ratio=R``, R = origin-only T / store-and-forward T
at the largest N in one group (median rounds), with cut-through's T, bound, flatness (T at
the largest N / T at the smallest) and origin copies beside. A missed target is printed
``FAIL``, not an exit status: the figures depend on the machine's load.

Run (root, Tier A): ``flock /tmp/fc-bench.lock .venv/bin/python bench/p2p.py [--size-mib 32
--origin-mibps 4 --host-mibps 32 --hosts 2 4 8 16 32 --groups 1 2 --rounds 3]``; the fault runs:
``... --hosts 8 16 --groups 1 2 --rounds 2 --baseline-rounds 0 --faults kill stall liar
--fault-rounds 2 --peer-stall-timeout 5``; ``--smoke`` runs one fault point (a kill, with
cut-through, at N = 4).
"""

from __future__ import annotations

import argparse
import atexit
import concurrent.futures
import contextlib
import math
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("PYTHONWARNINGS", "ignore")
warnings.simplefilter("ignore")

import p2p_faults  # noqa: E402
from _benchlib import loadavg, log, parse_with_smoke, tree_cpu  # noqa: E402
from p2p_hosts import BenchServeClient, Host  # noqa: E402
from p2p_links import PEER_PORT, SUBNET, Links, LoopbackLinks, NetnsLinks  # noqa: E402
from p2p_origin import make_image, origin_main  # noqa: E402
from p2p_report import Point, report  # noqa: E402

MIB = 1024 * 1024
MODES = ("origin-only", "store-and-forward", "cut-through")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=32, help="S, the image's size")
    parser.add_argument("--origin-mibps", type=float, default=4.0,
                        help="B_o, each group's link to the origin (MiB/s)")
    parser.add_argument("--host-mibps", type=float, default=32.0,
                        help="B_h, each compute's upload and download (MiB/s)")
    parser.add_argument("--hosts", type=int, nargs="+", default=[2, 4, 8, 16, 32],
                        help="N, the computes of each point")
    parser.add_argument("--groups", type=int, nargs="+", default=[1, 2],
                        help="G, peer groups (the hosts spread evenly over them)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of store-and-forward and of cut-through per point")
    parser.add_argument("--baseline-rounds", type=int, default=1,
                        help="rounds of origin-only per point (its T is (N/G) S/B_o: one round "
                        "shows the slope; each costs minutes at large N)")
    parser.add_argument("--peer-max-uploads", type=int, default=1,
                        help="[image_cache] peer_max_uploads (conductor and computes)")
    parser.add_argument("--tier", choices=("A", "B"), default="A",
                        help="A: network namespaces and tc tbf (root); B: loopback and "
                        "userspace token buckets (lower fidelity)")
    parser.add_argument("--workdir", default="/var/tmp",
                        help="where the computes' caches and the origin's file live")
    parser.add_argument("--faults", nargs="*", choices=p2p_faults.FAULTS, default=[],
                        help="fault runs beside the fault-free ones (bench/p2p_faults.py)")
    parser.add_argument("--fault-modes", nargs="+", choices=MODES[1:], default=list(MODES[1:]),
                        help="the modes the faults are run in")
    parser.add_argument("--fault-hosts", type=int, nargs="+", default=None,
                        help="the N of the fault runs (default: every N of --hosts)")
    parser.add_argument("--fault-source", choices=p2p_faults.FAULT_SOURCES, default="first",
                        help="the holder of group 0 that misbehaves: its first (the group's "
                        "only copy from the origin at first) or its second")
    parser.add_argument("--fault-rounds", type=int, default=1,
                        help="rounds of each fault run per point")
    parser.add_argument("--peer-stall-timeout", type=int, default=30,
                        help="[image_cache] peer_stall_timeout of the computes (all rounds)")
    parser.add_argument("--fault-stall", type=float, default=None,
                        help="seconds a stalling source sends nothing (default: 3 x "
                        "--peer-stall-timeout)")
    return parse_with_smoke(parser, {"size_mib": 4, "hosts": [2, 4], "groups": [1],
                                     "rounds": 1, "baseline_rounds": 1, "faults": ["kill"],
                                     "fault_modes": ["cut-through"], "fault_hosts": [4]})


# -- the driver ---------------------------------------------------------------------------------

def machine_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of all cores (``/proc/stat``; idle and iowait are not busy)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    total = sum(fields[:8])
    return float(total - fields[3] - fields[4]), float(total)


def nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


class Bench:
    """The driver of one number of groups: the origin and the computes it started, and
    the conductor's part it plays in each point (:meth:`run_point`)."""

    def __init__(self, args: argparse.Namespace, links: Links, work: Path) -> None:
        from oslo_config import cfg

        from fleetcache.common import config, context

        self.args = args
        self.links = links
        self.work = work
        self.size = args.size_mib * MIB
        self.ctx = multiprocessing.get_context("spawn")
        self.hosts: list[Host] = []
        self.origin: Any = None
        self.origin_conn: Any = None
        conf = cfg.ConfigOpts()
        config.register_all(conf)
        conf([], project="fleetcache", default_config_files=[])
        conf.set_override("peer_distribution", True, group="image_cache")
        conf.set_override("peer_max_uploads", args.peer_max_uploads, group="image_cache")
        self.conf = conf
        self.ctxt = context.get_admin_context()

    def start(self, files: dict[str, tuple[str, dict[str, Any]]]) -> None:
        links = self.links
        b_h = int(self.args.host_mibps * MIB)
        tier_b = links.tier == "B"
        self.origin_conn, conn = self.ctx.Pipe()
        spec = {"files": files, "groups": links.groups,
                "group_of_address": {SUBNET.format(g + 1, 1): g for g in range(links.groups)},
                "rate": int(self.args.origin_mibps * MIB) if tier_b else None,
                "ports": [int(u.rsplit(":", 1)[1]) for u in links.origin_urls] if tier_b
                else []}
        self.origin = self.ctx.Process(target=origin_main, name="origin", daemon=True,
                                       args=(links.origin_netns(), conn, spec))
        self.origin.start()
        for i in range(links.hosts):
            self.hosts.append(Host(self.ctx, i, links, {
                "host": f"compute{i}", "address": links.host_addresses[i],
                "instances_path": str(self.work / f"compute{i}"),
                "origin_url": links.origin_urls[links.group_of(i)],
                "port": 0 if tier_b else PEER_PORT, "max_uploads": self.args.peer_max_uploads,
                "upload_cap": b_h if tier_b else 0, "download_cap": b_h if tier_b else 0,
                "stall_timeout": self.args.peer_stall_timeout}))
        if not self.origin_conn.poll(60):
            raise RuntimeError("the origin did not start within 60 s")
        self.origin_conn.recv()
        for host in self.hosts:
            host.ready()
        self.sha512 = str(files["main"][1]["os_hash_value"])

    def stop(self) -> None:
        for host in self.hosts:
            host.stop()
        self.hosts = []
        if self.origin is not None:
            with contextlib.suppress(Exception):
                self.origin_conn.send(("stop", None))
            self.origin.join(10)
            if self.origin.is_alive():
                self.origin.kill()
            self.origin = None

    def _origin(self, cmd: str, arg: Any = None) -> Any:
        self.origin_conn.send((cmd, arg))
        return self.origin_conn.recv()

    def warm_up(self) -> None:
        """Every compute fetches a small image from the origin, then another from peers, so
        that the first point pays no first call (imports, connections)."""
        for mode in MODES:
            self.run_point(mode, len(self.hosts), kind="warm")

    def run_point(self, mode: str, n: int, kind: str = "main", fault: str | None = None
                  ) -> Point:
        hosts = self.hosts[:n]
        image_id = str(uuid.uuid4())
        self._origin("add", (image_id, kind))
        for host in hosts:
            host.control("stats")  # reset the upload counters
        log_before = self._origin("stats")
        wire_before = self.links.origin_counters()
        cpu_before, machine_before = tree_cpu(os.getpid()), machine_cpu()
        results: dict[str, tuple[dict[str, Any], float, float]] = {}
        call: Callable[[Host], tuple[dict[str, Any], float, float]]
        injected = (p2p_faults.FaultRun(fault, self.size, self.args.fault_stall,
                                        self.args.fault_source) if fault else None)
        started = time.time()
        if mode == "origin-only":
            def from_origin(host: Host) -> tuple[dict[str, Any], float, float]:
                return host.cache_images(image_id, [])
            call = from_origin
        else:
            call = self._planned(image_id, hosts, cut_through=mode == "cut-through",
                                 fault=injected)
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            futures = {h.name: pool.submit(call, h) for h in hosts}
            for name, future in futures.items():
                results[name] = future.result()
        wall = max(end for _, _, end in results.values()) - started
        cpu_after, machine_after = tree_cpu(os.getpid()), machine_cpu()
        log_after = self._origin("stats")
        wire_after = self.links.origin_counters()
        uploads = {h.name: h.control("stats") for h in hosts}
        fault_info = None
        if injected is not None:
            fault_info = injected.collect(hosts, image_id, self.sha512, results, started)
            if injected.victim is not None:  # its armed uploads, the one cut short included
                uploads[injected.victim.name]["sent"] = fault_info["victim_sent"]
        for host in hosts:
            host.control("drop", image_id)
        groups = self.links.groups
        origin_results = [0] * groups
        dead = fault_info["dead"] if fault_info is not None else None
        for host in hosts:
            result = results[host.name][0]
            died_with = (fault_info["victim_from_origin"]
                         if fault_info is not None and host.name == dead else None)
            origin_results[host.group] += p2p_faults.origin_bytes(result, died_with)
        finish = [end - started for _, _, end in results.values()]
        paths: dict[str, int] = {}
        for result, _, _ in results.values():
            path = str(result.get("download_path") or result["state"])
            paths[path] = paths.get(path, 0) + 1
        busy = machine_after[0] - machine_before[0]
        total = machine_after[1] - machine_before[1]
        return Point(
            mode=f"{mode}+{fault}" if fault else mode, base_mode=mode, fault=fault_info,
            hosts=n, groups=groups, wall=wall, p50=nearest_rank(finish, 0.5),
            p99=nearest_rank(finish, 0.99),
            origin_log=[a - b for a, b in zip(log_after["body_bytes"],
                                              log_before["body_bytes"], strict=True)],
            origin_results=origin_results,
            origin_unsent=[a - b for a, b in zip(log_after["unsent_bytes"],
                                                 log_before["unsent_bytes"], strict=True)],
            origin_gets=[a - b for a, b in zip(log_after["file_gets"],
                                               log_before["file_gets"], strict=True)],
            wire={k: [a - b for a, b in zip(wire_after[k], wire_before[k], strict=True)]
                  for k in wire_after},
            peer_bytes=sum(int(r.get("bytes_from_peers") or 0) for r, _, _ in results.values()),
            uploaded=sum(u["sent"] for u in uploads.values()),
            max_uploads=max((u["max_in_flight"] for u in uploads.values()), default=0),
            paths=paths,
            fallbacks=[f"{name}: {r.get('fallback_reason')}" for name, (r, _, _)
                       in results.items() if r.get("fallback_reason")],
            errors=[f"{name}: {r.get('reason')}" for name, (r, _, _) in results.items()
                    if r["state"] != "cached" and name != dead],
            bench_cpu=(cpu_after - cpu_before) / wall / (os.cpu_count() or 1),
            machine_cpu=busy / total if total else 0.0)

    def _planned(self, image_id: str, hosts: list[Host], cut_through: bool,
                 fault: p2p_faults.FaultRun | None = None
                 ) -> Callable[[Host], tuple[dict[str, Any], float, float]]:
        """The conductor's per-host call with the real PeerPlanner (``peer_cut_through`` as
        the mode says)."""
        from fleetcache.common.db.compute_states import PeerSite
        from fleetcache.conductor.precache.handback import from_sources_in_turn, resumed_bytes
        from fleetcache.conductor.precache.peers import PeerPlanner, PeerQuarantine
        from fleetcache.conductor.precache.results import checked_replies

        job = str(uuid.uuid4())
        self.conf.set_override("peer_cut_through", cut_through, group="image_cache")
        planner = PeerPlanner(self.conf, self.ctxt, job, PeerQuarantine(3600))
        client = BenchServeClient({h.name: h for h in hosts})
        if fault is not None:
            fault.planner = planner

        def call(host: Host) -> tuple[dict[str, Any], float, float]:
            """As the conductor's host call with computes of RPC 1.7: refused peer bytes,
            and an image whose peers all failed, come back, and the planner names the next
            source (:func:`~fleetcache.conductor.precache.hostcall.from_sources_in_turn`)."""
            site = PeerSite(url=host.url, group=f"cell{host.group}", address=host.address,
                            not_cached_header=True)
            times: list[float] = []

            def assigned(report: bool, hand_back: bool) -> tuple[Any, int]:
                assignment = planner.assign(host.name, site, image_id, client=client)
                if fault is not None:
                    fault.on_assigned(host, assignment)
                try:
                    result, started, ended = host.cache_images(
                        image_id, list(assignment.peers), report, hand_back)
                except BaseException:
                    planner.finished(host.name, site, image_id, assignment, None, client)
                    raise
                # As the conductor reads a reply (a resumed download's bytes counted in).
                checked = checked_replies({image_id: result}, [image_id])[image_id]
                planner.finished(host.name, site, image_id, assignment, checked, client)
                times.extend((started, ended))
                return checked, resumed_bytes({image_id: result}, image_id)

            result = from_sources_in_turn(assigned, True, True, host.name)
            return dict(result), times[0], times[-1]

        return call


# -- main -------------------------------------------------------------------------------------

@contextlib.contextmanager
def bench_for(args: argparse.Namespace, groups: int, hosts: int, work: Path,
              files: dict[str, tuple[str, dict[str, Any]]]) -> Iterator[tuple[Bench, Links]]:
    b_o, b_h = args.origin_mibps * MIB, args.host_mibps * MIB
    links: Links = (NetnsLinks if args.tier == "A" else LoopbackLinks)(groups, hosts, b_o, b_h)
    _LIVE.append(links)
    bench = Bench(args, links, work / f"g{groups}")
    try:
        links.setup()
        bench.start(files)
        bench.warm_up()
        yield bench, links
    finally:
        bench.stop()
        links.cleanup()
        _LIVE.remove(links)


_LIVE: list[Links] = []


def _cleanup_all() -> None:
    for links in list(_LIVE):
        links.cleanup()


def main() -> int:
    args = parse_args()
    if args.fault_stall is None:
        args.fault_stall = 3.0 * args.peer_stall_timeout
    if args.tier == "A":
        NetnsLinks.check()
    atexit.register(_cleanup_all)

    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)
    signal.signal(signal.SIGHUP, _exit)
    load_before = loadavg()
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="fcbench-p2p-", dir=args.workdir))
    points: list[Point] = []
    descs: list[str] = []
    try:
        files = {kind: (str(work / kind), make_image(work / kind, size))
                 for kind, size in (("main", args.size_mib * MIB), ("warm", 64 * 1024))}
        for groups in args.groups:
            hosts = max(args.hosts)
            with bench_for(args, groups, hosts, work, files) as (bench, links):
                descs.append(f"G={groups}: {links.describe()}")
                log(f"{groups} group(s), {hosts} computes up ({links.describe()})")
                fault_hosts = args.hosts if args.fault_hosts is None else args.fault_hosts
                for n in args.hosts:
                    faults = args.faults if n in fault_hosts else []
                    rounds = max(args.rounds, args.baseline_rounds,
                                 args.fault_rounds if faults else 0)
                    for rnd in range(rounds):
                        modes = MODES[rnd % len(MODES):] + MODES[:rnd % len(MODES)]
                        for mode in modes:
                            wanted = (args.baseline_rounds if mode == "origin-only"
                                      else args.rounds)
                            if rnd >= wanted:
                                continue
                            point = bench.run_point(mode, n)
                            points.append(point)
                            log(f"G={groups} N={n} round {rnd + 1} {mode}: T {point.wall:.2f} s"
                                f", origin {sum(point.origin_log) / MIB:.1f} MiB, peers "
                                f"{point.peer_bytes / MIB:.1f} MiB, machine CPU "
                                f"{point.machine_cpu:.0%}")
                        for fault in faults if rnd < args.fault_rounds else []:
                            for mode in args.fault_modes:
                                point = bench.run_point(mode, n, fault=fault)
                                points.append(point)
                                log(f"G={groups} N={n} round {rnd + 1} {mode} {fault}: T "
                                    f"{point.wall:.2f} s, origin "
                                    f"{sum(point.origin_log) / MIB:.1f} MiB, from the origin "
                                    f"{len((point.fault or {}).get('from_origin', {}))} "
                                    f"host(s), machine CPU {point.machine_cpu:.0%}")
                                for line in p2p_faults.round_lines(point):
                                    log(f"  {line}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report(points, args, descs, (load_before, loadavg()), time.monotonic() - started)


if __name__ == "__main__":
    sys.exit(main())
