#!/usr/bin/env python3
"""Peer distribution (issue 22): time to all hosts and origin bytes, origin-only beside
store-and-forward and cut-through, N computes' real data planes behind a thin link to the
image service.

What runs (one process each, :mod:`multiprocessing` spawn):

* **the origin**: a small Glance stand-in serving ``GET /v2/images/<id>`` (JSON with
  ``size``, ``disk_format``, ``os_hash_algo`` sha512, ``os_hash_value``) and ``GET
  /v2/images/<id>/file`` (200, or 206 for ``Range: bytes=N-``), one file of random bytes
  served under a fresh image id per point; it logs the bytes of every body it sent;
* **N computes**: each a real ``ComputeManager`` on a real ``DiskDriver`` (the real
  ``ImageCache``: one-pass size + sha512 verification, ``O_DIRECT`` write, fsync, publish),
  a real ``PeerServer`` and ``ServeGrants``, the real ``GlanceImageSource`` pointed at the
  origin. The driver (this process) calls their ``cache_images`` and ``serve_images`` over a
  pipe in place of the RPC bus;
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

Links (``--tier``):

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
origin's own log of the body bytes it sent, the sum over the hosts' results
(``cache_images``: ``bytes_downloaded`` less ``bytes_from_peers``) and, with Tier A, the
origin veth's tbf counter (``tc -s qdisc``) and its ``tx_bytes`` (bytes with headers: ``tc``
counts each wire segment's, so it must be the log times 1514/1448, a full segment's TCP/IP
overhead, within 1 %; a veth counts a GSO packet once with one header, so ``tx_bytes`` must
lie between the log and that); peer bytes (the receivers' ``bytes_from_peers`` beside the
sources' uploads); the largest number of uploads one source had in flight at once; CPU: the
bench's processes and the whole machine (``/proc/stat``) as a share of its cores. A point
where the machine was busier than 70 % of its cores is **INVALID** (CPU, not the link, may
have been the bound): printed, never judged.

Targets (judged on the median round; the worst round beside it):

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
left). The host calls are the conductor's with computes of RPC 1.6: refused peer bytes
come back and the planner names a second source (one victim the origin, the others a peer),
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
import ctypes
import dataclasses
import hashlib
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("PYTHONWARNINGS", "ignore")
warnings.simplefilter("ignore")

import p2p_faults  # noqa: E402
from _benchlib import headline, loadavg, log, median, parse_with_smoke, tree_cpu  # noqa: E402

MIB = 1024 * 1024
#: The origin's port (Tier A: in its own namespace).
ORIGIN_PORT = 9292
#: The computes' image server port (Tier A: each in its own namespace).
PEER_PORT = 8790
#: Subnet of peer group g: 10.201.<g+1>.0/24; the origin is .1, computes .10 on.
SUBNET = "10.201.{}.{}"
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
CHUNK = 256 * 1024
MODES = ("origin-only", "store-and-forward", "cut-through")
CLONE_NEWNET = 0x40000000


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


# -- links ------------------------------------------------------------------------------------

def _run(*cmd: str) -> str:
    """Run ``cmd``; its stdout. :raises RuntimeError: naming the command and its stderr."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({proc.returncode}): "
                           f"{proc.stderr.strip()}")
    return proc.stdout


class Links:
    """Where the origin and the computes listen, and how their links are shaped and counted.

    :ivar origin_urls: the origin's URL as group g's computes reach it.
    :ivar host_addresses: each compute's address (its ``my_ip``).
    """

    tier = "?"

    def __init__(self, groups: int, hosts: int, b_o: float, b_h: float) -> None:
        self.groups, self.hosts, self.b_o, self.b_h = groups, hosts, b_o, b_h
        self.origin_urls: list[str] = []
        self.host_addresses: list[str] = []

    def group_of(self, host: int) -> int:
        return host % self.groups

    def setup(self) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        pass

    def origin_netns(self) -> str | None:
        return None

    def host_netns(self, host: int) -> str | None:
        return None

    def origin_counters(self) -> dict[str, list[int]]:
        """Per group, counters of bytes that left the origin on that group's link."""
        return {}

    def describe(self) -> str:
        raise NotImplementedError


class NetnsLinks(Links):
    """Tier A (see the module docstring)."""

    tier = "A"

    def __init__(self, groups: int, hosts: int, b_o: float, b_h: float) -> None:
        super().__init__(groups, hosts, b_o, b_h)
        self.tag = f"fcp{os.getpid()}"
        self.namespaces: list[str] = []
        self.hub = f"{self.tag}-hub"
        self.origin = f"{self.tag}-org"

    @staticmethod
    def check() -> None:
        """:raises SystemExit: saying why Tier A cannot run here."""
        why = []
        if os.geteuid() != 0:
            why.append("not root (network namespaces and tc need CAP_NET_ADMIN)")
        for tool in ("ip", "tc"):
            if shutil.which(tool) is None:
                why.append(f"`{tool}` not found (install iproute2)")
        config = Path("/proc/config.gz")
        if config.exists():
            import gzip

            text = gzip.decompress(config.read_bytes()).decode(errors="replace")
            for option in ("CONFIG_NET_NS", "CONFIG_VETH", "CONFIG_BRIDGE",
                           "CONFIG_NET_SCH_TBF"):
                if not re.search(rf"^{option}=[ym]$", text, re.M):
                    why.append(f"the kernel lacks {option}")
        if why:
            sys.exit("bench/p2p.py: Tier A (network namespaces, veth, bridge, tc tbf) cannot "
                     "run here: " + "; ".join(why) + ". Run it as root on such a machine, or "
                     "pass --tier B for the loopback run (lower fidelity).")

    def _netns(self, name: str) -> str:
        _run("ip", "netns", "add", name)
        self.namespaces.append(name)
        _run("ip", "-n", name, "link", "set", "lo", "up")
        return name

    def _tbf(self, ns: str, dev: str, rate: float) -> None:
        burst = max(64 * 1024, int(rate / 50))
        _run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf",
             "rate", f"{int(rate * 8)}bit", "burst", str(burst), "latency", "200ms")

    def setup(self) -> None:
        self.check()
        try:
            self._netns(self.hub)
            self._netns(self.origin)
            for g in range(self.groups):
                bridge, ours, theirs = f"br{g}", f"og{g}", f"o{g}"
                _run("ip", "-n", self.hub, "link", "add", bridge, "type", "bridge")
                _run("ip", "-n", self.hub, "link", "set", bridge, "up")
                _run("ip", "link", "add", ours, "netns", self.origin, "type", "veth",
                     "peer", "name", theirs, "netns", self.hub)
                _run("ip", "-n", self.hub, "link", "set", theirs, "master", bridge, "up")
                _run("ip", "-n", self.origin, "addr", "add", SUBNET.format(g + 1, 1) + "/24",
                     "dev", ours)
                _run("ip", "-n", self.origin, "link", "set", ours, "up")
                self._tbf(self.origin, ours, self.b_o)
                self.origin_urls.append(f"http://{SUBNET.format(g + 1, 1)}:{ORIGIN_PORT}")
            for i in range(self.hosts):
                g = self.group_of(i)
                ns, port = self._netns(f"{self.tag}-h{i}"), f"h{i}"
                address = SUBNET.format(g + 1, 10 + i // self.groups)
                _run("ip", "link", "add", "eth0", "netns", ns, "type", "veth",
                     "peer", "name", port, "netns", self.hub)
                _run("ip", "-n", self.hub, "link", "set", port, "master", f"br{g}", "up")
                _run("ip", "-n", ns, "addr", "add", address + "/24", "dev", "eth0")
                _run("ip", "-n", ns, "link", "set", "eth0", "up")
                self._tbf(ns, "eth0", self.b_h)      # its upload
                self._tbf(self.hub, port, self.b_h)  # its download
                self.host_addresses.append(address)
        except BaseException:
            self.cleanup()
            raise

    def cleanup(self) -> None:
        while self.namespaces:
            name = self.namespaces.pop()
            with contextlib.suppress(Exception):
                subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)

    def origin_netns(self) -> str | None:
        return self.origin

    def host_netns(self, host: int) -> str | None:
        return f"{self.tag}-h{host}"

    def origin_counters(self) -> dict[str, list[int]]:
        qdisc, link = [], []
        for g in range(self.groups):
            out = json.loads(_run("tc", "-n", self.origin, "-s", "-j", "qdisc", "show",
                                  "dev", f"og{g}"))
            qdisc.append(sum(int(q["bytes"]) for q in out if q.get("root")))
            out = json.loads(_run("ip", "-n", self.origin, "-s", "-j", "link", "show",
                                  "dev", f"og{g}"))
            link.append(int(out[0]["stats64"]["tx"]["bytes"]))
        return {"tc": qdisc, "tx_bytes": link}

    def describe(self) -> str:
        return (f"Tier A: network namespaces {self.tag}-*, a bridge per group, the origin "
                f"behind one veth per group with tc tbf {self.b_o / MIB:g} MiB/s, each compute "
                f"behind a veth with tbf {self.b_h / MIB:g} MiB/s on both ends")


class LoopbackLinks(Links):
    """Tier B (see the module docstring)."""

    tier = "B"

    def setup(self) -> None:
        base = _free_ports(self.groups)
        self.origin_urls = [f"http://127.0.0.1:{p}" for p in base]
        self.host_addresses = ["127.0.0.1"] * self.hosts

    def describe(self) -> str:
        return (f"Tier B (loopback, LOWER FIDELITY: no shared link, no TCP on a shaped queue): "
                f"the origin's egress per group through a TokenBucket of {self.b_o / MIB:g} "
                f"MiB/s, each compute's uploads and downloads capped at {self.b_h / MIB:g} "
                "MiB/s by [image_cache] max_upload/max_download_bytes_per_second")


def _free_ports(count: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()


def enter_netns(name: str | None) -> None:
    """Move this process (its only thread, before any other starts) into netns ``name``."""
    if name is None:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({name}): {os.strerror(err)}")
    finally:
        os.close(fd)


# -- the origin -------------------------------------------------------------------------------

class _OriginState:
    def __init__(self, files: dict[str, tuple[str, dict[str, Any]]], groups: int,
                 group_of_address: dict[str, int], rate: float | None) -> None:
        from fleetcache.compute.imagecache.bandwidth import TokenBucket

        #: kind -> (path, meta): the image's bytes, and a small one to warm up with.
        self.files = files
        #: image id -> kind.
        self.images: dict[str, str] = {}
        self.group_of_address = group_of_address
        self.body_bytes = [0] * groups
        self.file_gets = [0] * groups
        self.lock = threading.Lock()
        self.buckets = [TokenBucket(rate, burst=CHUNK) if rate else None
                        for _ in range(groups)]


def _origin_handler(state: _OriginState) -> type[BaseHTTPRequestHandler]:
    route = re.compile(r"^/v2/images/([0-9a-f-]{36})(/file)?$")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            match = route.match(self.path)
            if match is None or match.group(1) not in state.images:
                self._send(404, b"{}")
                return
            image_id = match.group(1)
            path, meta = state.files[state.images[image_id]]
            if not match.group(2):
                self._send(200, json.dumps({**meta, "id": image_id, "name": image_id}).encode())
                return
            group = getattr(self.server, "group", None)
            if group is None:
                group = state.group_of_address[self.connection.getsockname()[0]]
            size = int(meta["size"])
            start = 0
            rng = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
            if rng:
                start = int(rng.group(1))
            self.send_response(206 if start else 200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
            self.end_headers()
            with state.lock:
                state.file_gets[group] += 1
            bucket = state.buckets[group]
            fd = os.open(path, os.O_RDONLY)
            try:
                offset = start
                while offset < size:
                    data = os.pread(fd, min(CHUNK, size - offset), offset)
                    if bucket is not None:
                        bucket.take(len(data))
                    self.wfile.write(data)
                    offset += len(data)
                    with state.lock:
                        state.body_bytes[group] += len(data)
            finally:
                os.close(fd)

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that left mid-body


def origin_main(netns: str | None, conn: multiprocessing.connection.Connection,
                spec: dict[str, Any]) -> None:
    """The origin process: serve until told to stop; answer ``add`` and ``stats``."""
    enter_netns(netns)
    state = _OriginState(spec["files"], spec["groups"], spec["group_of_address"],
                         spec["rate"])
    servers = []
    if spec["ports"]:  # Tier B: a port (and a bucket) per group
        for g, port in enumerate(spec["ports"]):
            server = _Server(("127.0.0.1", port), _origin_handler(state))
            server.group = g  # type: ignore[attr-defined]
            servers.append(server)
    else:
        servers.append(_Server(("0.0.0.0", ORIGIN_PORT), _origin_handler(state)))
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    conn.send("ready")
    while True:
        cmd, arg = conn.recv()
        if cmd == "add":
            image_id, kind = arg
            state.images[image_id] = kind
            conn.send(None)
        elif cmd == "stats":
            with state.lock:
                conn.send({"body_bytes": list(state.body_bytes),
                           "file_gets": list(state.file_gets)})
        else:
            break
    for server in servers:
        server.shutdown()


# -- a compute --------------------------------------------------------------------------------

class _UploadMetrics:
    """The image server's upload counters the bench needs (``PeerMetrics``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.max_in_flight = 0
        self.sent = 0
        self.requests: dict[int, int] = {}
        self.denied: dict[str, int] = {}

    def record_peer_request(self, code: int) -> None:
        with self.lock:
            self.requests[code] = self.requests.get(code, 0) + 1

    def record_peer_denied(self, reason: str) -> None:
        with self.lock:
            self.denied[reason] = self.denied.get(reason, 0) + 1

    def record_peer_upload(self, sent: int, in_flight: int) -> None:
        with self.lock:
            self.sent += sent
            self.max_in_flight = max(self.max_in_flight, in_flight)

    def take(self) -> dict[str, Any]:
        """The counters since the last call (then reset)."""
        with self.lock:
            out = {"max_in_flight": self.max_in_flight, "sent": self.sent,
                   "requests": dict(self.requests), "denied": dict(self.denied)}
            self.max_in_flight = self.sent = 0
            self.requests.clear()
            self.denied.clear()
        return out


def host_main(netns: str | None, calls: multiprocessing.connection.Connection,
              control: multiprocessing.connection.Connection, spec: dict[str, Any]) -> None:
    """One compute: a ComputeManager on a DiskDriver, with its image server. ``calls``
    carries ``cache_images`` (one at a time), ``control`` the rest (``serve_images``, stats,
    drop), each served by its own thread."""
    enter_netns(netns)
    import logging

    from oslo_config import cfg

    from fleetcache.common import config, context
    from fleetcache.compute.imagecache.layout import cache_name
    from fleetcache.compute.manager import ComputeManager
    from fleetcache.compute.peers import PeerServer, ServeGrants
    from fleetcache.compute.virt.disk import DiskDriver
    from fleetcache.image.glance import GlanceImageSource

    logging.basicConfig(level=logging.WARNING, format=f"{spec['host']}: %(message)s")
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([], project="fleetcache", default_config_files=[])
    conf.set_override("host", spec["host"])
    conf.set_override("my_ip", spec["address"])
    conf.set_override("instances_path", spec["instances_path"])
    conf.set_override("backend", "glance", group="image_source")
    conf.set_override("api_servers", [spec["origin_url"]], group="glance")
    opts = {"peer_distribution": True, "peer_listen_address": spec["address"],
            "peer_listen_port": spec["port"], "peer_max_uploads": spec["max_uploads"],
            "max_upload_bytes_per_second": spec["upload_cap"],
            "max_download_bytes_per_second": spec["download_cap"],
            "peer_stall_timeout": spec["stall_timeout"]}
    for name, value in opts.items():
        conf.set_override(name, value, group="image_cache")
    origin = GlanceImageSource(conf)
    driver = DiskDriver(conf, origin)
    driver.init_host(spec["host"])
    grants = ServeGrants()
    metrics = _UploadMetrics()
    manager = ComputeManager(conf, driver, grants=grants)
    server = PeerServer(conf, driver.image_cache, grants, metrics)
    server.start()
    faults = p2p_faults.HostFaults(
        server, lambda: PeerServer(conf, driver.image_cache, grants, metrics),
        driver.image_cache, origin)
    ctxt = context.get_admin_context()
    cache = driver.image_cache

    def serve_calls() -> None:
        while True:
            try:
                image_id, peers, report_refused = calls.recv()
            except EOFError:
                return
            started = time.time()
            result = manager.cache_images(ctxt, [image_id], peers={image_id: peers},
                                          origin_after_refused_peers=not report_refused
                                          )[image_id]
            calls.send((dict(result), started, time.time()))

    threading.Thread(target=serve_calls, daemon=True).start()
    control.send(server.url)
    while True:
        try:
            cmd, args = control.recv()
        except EOFError:
            break
        if cmd == "serve":
            try:
                control.send(("ok", manager.serve_images(ctxt, *args)))
            except Exception as exc:  # noqa: BLE001 - handed to the planner as the RPC would
                control.send(("error", f"{type(exc).__name__}: {exc}"))
        elif cmd == "stats":
            control.send(metrics.take())
        elif cmd == "drop":  # the point's image, so that the next point starts empty
            name = cache_name(args)
            with cache.lock(args):
                for path in (cache.path_for(args), os.path.join(cache.index.directory, name),
                             os.path.join(cache.pins.directory, name)):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
            control.send(None)
        elif cmd.startswith("fault_"):
            control.send(faults.command(cmd, args))
        else:
            break
    faults.server.stop()


class Host:
    """The driver's handle on one compute process."""

    def __init__(self, ctx: Any, index: int, links: Links, spec: dict[str, Any]) -> None:
        self.name = spec["host"]
        self.index = index
        self.group = links.group_of(index)
        self.address = spec["address"]
        self._calls, calls = ctx.Pipe()
        self._control, control = ctx.Pipe()
        self._lock = threading.Lock()
        self.proc = ctx.Process(target=host_main, name=self.name, daemon=True,
                                args=(links.host_netns(index), calls, control, spec))
        self.proc.start()
        self.url = ""

    def ready(self, timeout: float = 120) -> None:
        if not self._control.poll(timeout):
            raise RuntimeError(f"{self.name} did not start within {timeout} s")
        self.url = self._control.recv()

    def cache_images(self, image_id: str, peers: list[Any], report_refused: bool = False
                     ) -> tuple[dict[str, Any], float, float]:
        self._calls.send((image_id, peers, report_refused and bool(peers)))
        result: tuple[dict[str, Any], float, float] = self._calls.recv()
        return result

    def control(self, cmd: str, args: Any = None) -> Any:
        with self._lock:
            self._control.send((cmd, args))
            return self._control.recv()

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._control.send(("stop", None))
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)


class BenchServeClient:
    """The planner's ``ServeClient``: ``serve_images`` to a host's process (as the compute
    RPC API would, a failure raised to the planner)."""

    def __init__(self, hosts: dict[str, Host]) -> None:
        self.hosts = hosts

    def serve_images(self, ctxt: Any, host: str, job_uuid: str, key: str,
                     image_ids: list[str], until: float) -> list[str]:
        status, value = self.hosts[host].control("serve", (job_uuid, key, image_ids, until))
        if status != "ok":
            raise RuntimeError(value)
        served: list[str] = value
        return served


# -- measuring --------------------------------------------------------------------------------

def machine_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of all cores (``/proc/stat``; idle and iowait are not busy)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    total = sum(fields[:8])
    return float(total - fields[3] - fields[4]), float(total)


def nearest_rank(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


@dataclasses.dataclass
class Point:
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

    @property
    def invalid(self) -> bool:
        return self.machine_cpu > CPU_LIMIT

    def copies_per_group(self, size: int) -> float:
        return sum(self.origin_log) / size / self.groups


class Bench:
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
        injected = (p2p_faults.FaultRun(fault, self.size, self.args.fault_stall)
                    if fault else None)
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
        from fleetcache.conductor.precache.hostcall import after_refused, is_refused
        from fleetcache.conductor.precache.peers import PeerPlanner, PeerQuarantine

        job = str(uuid.uuid4())
        self.conf.set_override("peer_cut_through", cut_through, group="image_cache")
        planner = PeerPlanner(self.conf, self.ctxt, job, PeerQuarantine(3600))
        client = BenchServeClient({h.name: h for h in hosts})
        if fault is not None:
            fault.planner = planner

        def assigned(host: Host, site: PeerSite, report: bool
                     ) -> tuple[dict[str, Any], float, float]:
            assignment = planner.assign(host.name, site, image_id, client=client)
            if fault is not None:
                fault.on_assigned(host, assignment)
            try:
                got = host.cache_images(image_id, list(assignment.peers), report)
            except BaseException:
                planner.finished(host.name, site, image_id, assignment, None, client)
                raise
            result: Any = got[0]
            planner.finished(host.name, site, image_id, assignment, result, client)
            return got

        def call(host: Host) -> tuple[dict[str, Any], float, float]:
            """As the conductor's host call with computes of RPC 1.6: refused peer bytes
            come back, and the planner names a second source."""
            site = PeerSite(url=host.url, group=f"cell{host.group}", address=host.address)
            first = assigned(host, site, report=True)
            if not is_refused(first[0]):  # type: ignore[arg-type]
                return first
            second = assigned(host, site, report=False)
            return dict(after_refused(first[0], second[0])), first[1], second[2]  # type: ignore[arg-type]

        return call


# -- report -----------------------------------------------------------------------------------

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
                # What the origin sent to the host that died and it never wrote (its
                # sockets' buffers, the chunk it was reading) is in the log, not in any
                # result, and what sat in the origin's own socket when the connection was
                # reset is in the log, not on the wire: between the two, never outside.
                lost = log_bytes - res_bytes
                agree = -AGREE * size <= lost <= DEAD_HOST_LOST
                least_sent = res_bytes
                notes.append(f"lost with the dead host (sent by the origin, never written): "
                             f"{lost / MIB:.2f} MiB")
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


# -- main -------------------------------------------------------------------------------------

def make_image(path: Path, size: int) -> dict[str, Any]:
    digest, md5 = hashlib.sha512(), hashlib.md5()  # noqa: S324 - Glance's checksum field
    with open(path, "wb") as f:
        left = size
        while left:
            block = os.urandom(min(4 * MIB, left))
            f.write(block)
            digest.update(block)
            md5.update(block)
            left -= len(block)
    return {"status": "active", "disk_format": "raw", "container_format": "bare",
            "size": size, "checksum": md5.hexdigest(), "os_hash_algo": "sha512",
            "os_hash_value": digest.hexdigest(), "visibility": "shared"}


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
