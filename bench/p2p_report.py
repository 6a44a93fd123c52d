"""The report of ``bench/p2p.py``: what one point measured, the targets' bounds, and the
table, the verdicts and the headline printed from the points of a run.

Every figure is judged on the median of a point's valid rounds (a round is invalid when the
machine was busier than :data:`CPU_LIMIT` of its cores); the origin's bytes are counted in
independent ways, and a point whose counts disagree is printed as such.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import time
from typing import Any

import p2p_faults
from _benchlib import headline, median

MIB = 1024 * 1024
#: Share of the machine's cores above which a point is invalid (CPU-bound, not link-bound).
CPU_LIMIT = 0.70
#: Wire bytes per payload byte of a full TCP segment on a 1500-byte MTU with timestamps
#: (Ethernet 14 + IPv4 20 + TCP 20 + 12 of options per 1448 bytes of payload).
WIRE_PER_PAYLOAD = 1514 / 1448
#: Largest spread of two counts of origin bytes, as a share of one copy of the image.
AGREE = 0.01
#: The most a host killed by a fault may take down with it unwritten: the chunk it was
#: reading from the origin (4 MiB, ``[glance] download_chunk_size``) and its sockets'
#: buffers (4.75-6.0 MiB measured, docs/performance.md "Peer distribution").
DEAD_HOST_LOST = 8 * MIB


@dataclasses.dataclass
class Point:
    """One round of one mode at one (G, N): what the report judges, kept whole so that
    the counts of origin bytes can be checked against each other after the run."""

    mode: str
    hosts: int
    groups: int
    wall: float
    p50: float
    p99: float
    origin_log: list[int]
    origin_results: list[int]
    origin_gets: list[int]
    wire: dict[str, list[int]]
    peer_bytes: int
    uploaded: int
    max_uploads: int
    paths: dict[str, int]
    fallbacks: list[str]
    errors: list[str]
    bench_cpu: float
    machine_cpu: float
    #: A fault point: what :class:`p2p_faults.FaultRun` gathered (``mode`` is then
    #: ``<base_mode>+<fault>``).
    fault: dict[str, Any] | None = None
    base_mode: str = ""
    #: Body bytes the origin wrote into a socket that never sent them (a receiver died):
    #: not in ``origin_log``, which counts what its TCP sent.
    origin_unsent: list[int] = dataclasses.field(default_factory=list)

    @property
    def invalid(self) -> bool:
        return self.machine_cpu > CPU_LIMIT

    def copies_per_group(self, size: int) -> float:
        return sum(self.origin_log) / size / self.groups


def bound_issue(size: int, b_o: float, b_h: float, n: int, groups: int) -> float:
    """The issue's store-and-forward bound: 1.2 x (S/B_o + ceil(log2(N/G)) x S/B_h)."""
    per_group = max(1, math.ceil(n / groups))
    return 1.2 * (size / b_o + math.ceil(math.log2(per_group)) * size / b_h)


def model_planner(size: int, b_o: float, b_h: float, n: int, groups: int, k: int) -> float:
    """The planner's store-and-forward with ``k`` uploads per source, each of a source's
    receivers at B_h/k: holders grow (k+1)-fold per round of k S/B_h (an upper bound)."""
    per_group = max(1, math.ceil(n / groups))
    rounds = math.ceil(math.log(per_group, k + 1) - 1e-9) if per_group > 1 else 0
    return size / b_o + rounds * k * size / b_h


def report(points: list[Point], args: argparse.Namespace, links_desc: list[str],
           load: tuple[str, str], elapsed: float) -> int:
    size = args.size_mib * MIB
    b_o, b_h = args.origin_mibps * MIB, args.host_mibps * MIB
    print(f"image {args.size_mib} MiB (sha512), B_o {args.origin_mibps:g} MiB/s per group, "
          f"B_h {args.host_mibps:g} MiB/s, peer_max_uploads {args.peer_max_uploads}, "
          f"store-and-forward {args.rounds} round(s), origin-only {args.baseline_rounds}; "
          f"{os.cpu_count()} cores, loadavg {load[0]}->{load[1]}, {elapsed:.0f} s, at "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for desc in links_desc:
        print(f"links: {desc}")
    print(f"{'mode':>18} {'G':>2} {'N':>3} {'T med':>7} {'T worst':>7} {'p50':>6} {'p99':>6} "
          f"{'orig/G':>6} {'GETs':>4} {'peer MiB':>8} {'upl':>3} {'cpu':>5} {'mach':>5}  "
          "counts / notes")
    failed = 0
    by_key: dict[tuple[str, int, int], list[Point]] = {}
    for point in points:
        by_key.setdefault((point.mode, point.groups, point.hosts), []).append(point)
    summary: dict[tuple[str, int, int], float] = {}
    for (mode, groups, n), rows in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][2],
                                                                             kv[0][0])):
        valid = [p for p in rows if not p.invalid]
        walls = [p.wall for p in rows]
        med = median(walls)
        # The valid rounds' median; when none is valid, all rounds' (printed as INVALID).
        summary[(mode, groups, n)] = median([p.wall for p in valid or rows])
        worst = max(rows, key=lambda p: p.wall)
        notes: list[str] = []
        agreed, ratios = 0, dict[str, list[float]]()
        for p in rows:
            log_bytes, res_bytes = sum(p.origin_log), sum(p.origin_results)
            agree = abs(log_bytes - res_bytes) <= AGREE * size
            # The origin's count of what went out, as the wire's counters must see it.
            least_sent = log_bytes
            if p.fault and p.fault.get("dead"):
                # What the origin sent to the host that died and it never wrote (the link's
                # queue, its socket's buffer, the chunk it was reading) is in the log, not in
                # any result (what sat in the origin's own socket when the connection was
                # reset is in neither: the log counts what its TCP sent).
                lost = log_bytes - res_bytes
                agree = -AGREE * size <= lost <= DEAD_HOST_LOST
                least_sent = res_bytes
                notes.append(f"lost with the dead host (sent by the origin, never written): "
                             f"{lost / MIB:.2f} MiB; written by the origin but never sent "
                             f"(its socket's, at the reset): {sum(p.origin_unsent) / MIB:.2f} MiB")
            if p.fault:  # a source cut short sent bytes its receiver never wrote
                agree = agree and p.uploaded >= p.peer_bytes - AGREE * size
            else:
                agree = agree and abs(p.peer_bytes - p.uploaded) <= AGREE * size
            for kind, values in p.wire.items():
                wire_bytes, slack = sum(values), AGREE * max(log_bytes, size)
                if kind == "tc":  # per wire segment: the log plus each segment's headers
                    ok = (least_sent * WIRE_PER_PAYLOAD - slack <= wire_bytes
                          <= log_bytes * WIRE_PER_PAYLOAD + slack)
                else:  # a veth counts a GSO packet once, one header: between the two
                    ok = least_sent - slack <= wire_bytes <= log_bytes * WIRE_PER_PAYLOAD + slack
                agree = agree and ok
                ratios.setdefault(kind, []).append(wire_bytes / log_bytes if log_bytes else 0)
            agreed += agree
            if not agree:
                notes.append(f"COUNTS DISAGREE: origin log {log_bytes}, results {res_bytes}, "
                             + ", ".join(f"{k} {sum(v)}" for k, v in p.wire.items())
                             + f"; peers: results {p.peer_bytes}, uploads {p.uploaded}")
            if p.errors:
                notes.append("ERRORS: " + "; ".join(p.errors))
            if p.fallbacks:
                notes.append("fallbacks: " + "; ".join(p.fallbacks))
            if p.fault and (p.fault["verified"] != p.fault["hosts"] or p.fault["partials"]):
                notes.append(f"NOT VERIFIED: {p.fault['verified']}/{p.fault['hosts']} bases "
                             f"hashed right, {p.fault['partials']} partial file(s) left")
                failed = 1
            if not agree or p.errors:
                failed = 1
        wire = "".join(f", {k} {min(v):.4f}-{max(v):.4f}x the log" for k, v in ratios.items())
        notes.insert(0, f"counts agree {agreed}/{len(rows)} (origin log = results{wire}; "
                     "peer results = uploads)")
        invalid = [p for p in rows if p.invalid]
        if invalid:
            notes.append(f"INVALID {len(invalid)}/{len(rows)}: machine CPU "
                         + ", ".join(f"{p.machine_cpu:.0%}" for p in invalid)
                         + f" > {CPU_LIMIT:.0%} of {os.cpu_count()} cores")
        mid = sorted(rows, key=lambda p: p.wall)[len(rows) // 2]
        print(f"{mode:>18} {groups:>2} {n:>3} {med:7.2f} {worst.wall:7.2f} {mid.p50:6.2f} "
              f"{mid.p99:6.2f} {mid.copies_per_group(size):6.3f} {sum(mid.origin_gets):>4} "
              f"{mid.peer_bytes / MIB:8.1f} {mid.max_uploads:>3} {mid.bench_cpu:5.0%} "
              f"{max(p.machine_cpu for p in rows):5.0%}  "
              + " | ".join(notes))
    print("columns: T med/worst = time to all hosts (s), median and worst round; p50/p99 = "
          "per-host completion of the median round; orig/G = origin bytes in copies of S per "
          "group (the origin's log); GETs = image-data GETs on the origin; upl = most uploads "
          "one source had in flight; cpu = the bench's processes, mach = the whole machine "
          "(worst round), as a share of its cores")
    print("targets (store-and-forward, median of the valid rounds; the issue's bound with "
          f"log2, the planner's k={args.peer_max_uploads} model beside, informative):")
    headline_ratio = math.nan
    for (mode, groups, n), rows in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        if mode != "store-and-forward":
            continue
        t = summary[(mode, groups, n)]
        base = summary.get(("origin-only", groups, n), math.nan)
        bound = bound_issue(size, b_o, b_h, n, groups)
        model = model_planner(size, b_o, b_h, n, groups, args.peer_max_uploads)
        valid = [p for p in rows if not p.invalid]
        copies = max(p.copies_per_group(size) for p in valid or rows)
        verdict_t = "PASS" if t <= bound else "FAIL"
        verdict_c = "PASS" if copies <= 1.05 else "FAIL"
        if args.smoke:
            verdict_t = verdict_c = "not judged (smoke)"
        elif not valid:  # shown, not judged
            verdict_t, verdict_c = (f"INVALID (machine CPU-bound; would be {verdict_t})",
                                    f"INVALID (would be {verdict_c})")
        worst_wall = max(p.wall for p in rows)
        print(f"  G={groups} N={n:>2}: T {t:.2f} s (worst {worst_wall:.2f}) <= 1.2 x "
              f"({size / b_o:.3g} + ceil(log2({n}/{groups})) x {size / b_h:.3g}) = "
              f"{bound:.2f} s: {verdict_t}; "
              f"planner model {model:.1f} s; origin copies per group (worst round) "
              f"{copies:.3f} <= 1.05: {verdict_c}; origin-only {base:.2f} s, gain "
              f"{base / t:.2f}x")
        if groups == min(args.groups) and n == max(args.hosts):
            headline_ratio = base / t
    print("targets (cut-through, median of the valid rounds):")
    for groups in sorted(args.groups):
        _report_cut_through(by_key, summary, args, groups)
    p2p_faults.report(points, size, summary)
    g0, n0 = min(args.groups), max(args.hosts)
    sf = by_key.get(("store-and-forward", g0, n0), [])
    ct = by_key.get(("cut-through", g0, n0), [])
    n_min = min(args.hosts)
    print(headline(
        "p2p", headline_ratio, tier=args.tier, size_mib=args.size_mib,
        origin_mibps=args.origin_mibps, host_mibps=args.host_mibps, groups=g0, hosts=n0,
        origin_only_s=round(summary.get(("origin-only", g0, n0), math.nan), 2),
        store_forward_s=round(summary.get(("store-and-forward", g0, n0), math.nan), 2),
        store_forward_worst_s=round(max((p.wall for p in sf), default=math.nan), 2),
        bound_s=round(bound_issue(size, b_o, b_h, n0, g0), 2),
        origin_copies_per_group=round(max((p.copies_per_group(size) for p in sf),
                                          default=math.nan), 3),
        cut_through_s=round(summary.get(("cut-through", g0, n0), math.nan), 2),
        cut_through_worst_s=round(max((p.wall for p in ct), default=math.nan), 2),
        cut_through_bound_s=round(bound_cut_through(size, b_o, b_h), 2),
        cut_through_flatness=round(summary.get(("cut-through", g0, n0), math.nan)
                                   / summary.get(("cut-through", g0, n_min), math.nan), 3),
        cut_through_copies_per_group=round(max((p.copies_per_group(size) for p in ct),
                                               default=math.nan), 3),
        invalid_points=sum(p.invalid for p in points)))
    return failed


def bound_cut_through(size: int, b_o: float, b_h: float) -> float:
    """The issue's cut-through bound: 1.3 x (S/B_o + S/B_h), whatever N."""
    return 1.3 * (size / b_o + size / b_h)


def _report_cut_through(by_key: dict[tuple[str, int, int], list[Point]],
                        summary: dict[tuple[str, int, int], float],
                        args: argparse.Namespace, groups: int) -> None:
    """Print the cut-through targets of ``groups``: each N against the bound, the flatness
    T(largest N) / T(smallest N) <= 1.5, origin copies per group <= 1.05."""
    size = args.size_mib * MIB
    b_o, b_h = args.origin_mibps * MIB, args.host_mibps * MIB
    bound = bound_cut_through(size, b_o, b_h)
    any_invalid = False
    for n in sorted(args.hosts):
        rows = by_key.get(("cut-through", groups, n), [])
        if not rows:
            continue
        valid = [p for p in rows if not p.invalid]
        any_invalid = any_invalid or not valid
        t = summary[("cut-through", groups, n)]
        copies = max(p.copies_per_group(size) for p in valid or rows)
        verdict_t = "PASS" if t <= bound else "FAIL"
        verdict_c = "PASS" if copies <= 1.05 else "FAIL"
        if args.smoke:
            verdict_t = verdict_c = "not judged (smoke)"
        elif not valid:
            verdict_t, verdict_c = (f"INVALID (machine CPU-bound; would be {verdict_t})",
                                    f"INVALID (would be {verdict_c})")
        sf = summary.get(("store-and-forward", groups, n), math.nan)
        print(f"  G={groups} N={n:>2}: T {t:.2f} s (worst {max(p.wall for p in rows):.2f}) "
              f"<= 1.3 x ({size / b_o:.3g} + {size / b_h:.3g}) = {bound:.2f} s: {verdict_t}; "
              f"origin copies per group (worst round) {copies:.3f} <= 1.05: {verdict_c}; "
              f"store-and-forward {sf:.2f} s")
    lo, hi = min(args.hosts), max(args.hosts)
    if ("cut-through", groups, lo) in summary and ("cut-through", groups, hi) in summary:
        flat = summary[("cut-through", groups, hi)] / summary[("cut-through", groups, lo)]
        verdict = "PASS" if flat <= 1.5 else "FAIL"
        if args.smoke:
            verdict = "not judged (smoke)"
        elif any_invalid:
            verdict = f"INVALID (a point was CPU-bound; would be {verdict})"
        print(f"  G={groups}: T({hi}) / T({lo}) = {flat:.3f} <= 1.5: {verdict}")
