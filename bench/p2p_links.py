"""The links of ``bench/p2p.py``: where its origin and computes listen, how their links are
shaped (Tier A: network namespaces, veth, a bridge per group, tc tbf; Tier B: loopback) and
how the bytes that left the origin are counted on the wire.

The tiers are described in ``bench/p2p.py``'s docstring ("Links"). The namespaces a
:class:`NetnsLinks` creates are its own to delete: the bench calls :meth:`Links.cleanup` on
every exit path. A process moves itself into its namespace with :func:`enter_netns` before
it starts any thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

MIB = 1024 * 1024
#: The origin's port (Tier A: in its own namespace).
ORIGIN_PORT = 9292
#: The computes' image server port (Tier A: each in its own namespace).
PEER_PORT = 8790
#: Subnet of peer group g: 10.201.<g+1>.0/24; the origin is .1, computes .10 on.
SUBNET = "10.201.{}.{}"
CLONE_NEWNET = 0x40000000


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
    """Tier A (see ``bench/p2p.py``'s docstring, "Links")."""

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
    """Tier B (see ``bench/p2p.py``'s docstring, "Links")."""

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
