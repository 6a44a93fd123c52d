"""Fault runs of ``bench/p2p.py`` (issue 22): one source of group 0 misbehaves while the
group's hosts fetch the image, beside the fault-free rounds of the same mode.

Faults (``--faults``), each injected into the **first holder of group 0** (the host the
planner gave the group's image-service slot: the head of the chain with cut-through, the
first source with store-and-forward):

* ``kill``: once its image server has sent S/2 bytes, the host dies: its server is stopped
  (the connections under way reset, new ones refused) and its own download from the origin
  fails at its next chunk (the host's call ends ``failed``; what it took from the origin is
  counted). Its receivers resume from their next source with ``Range``, the image service
  last. (Until 2026-11-29 only the server was stopped and the victim's download went on: a
  fault that cannot happen to a compute, whose image server lives in its own process, and
  that cost its receiver's resume a second copy of what the victim was still fetching.)
* ``stall``: once it has sent S/2 bytes, the upload under way sends nothing for
  ``--fault-stall`` seconds (longer than ``peer_stall_timeout``, which the run sets with
  ``--peer-stall-timeout``), then goes on (its receiver has left by then).
* ``liar``: every chunk it uploads has one byte flipped (the size stays right): its
  receivers' verification must refuse the bytes, each then fetches the image from the origin
  and names the liar, which the planner quarantines. With cut-through a receiver relays what
  it got, so every host behind the liar in its chain is a victim too (and names its own
  source): expect up to N/G origin copies in group 0, not 1.05.

``--fault-source second`` puts the fault on the **second holder of group 0** instead (the
first host of the group given a peer: a relay behind the head with cut-through, the second
complete holder with store-and-forward), where the group's bytes from the origin exist
elsewhere too: what a fault costs when it is not the group's only copy that fails.

What is injected: the compute's ``PeerServer._send_span`` is wrapped in the compute's own
process (:class:`HostFaults`); while a fault is armed the victim sends in pieces of
:data:`PIECE` (``pread`` + ``sendall`` in place of ``sendfile``), counting the bytes handed
to the kernel per receiver. The receivers are unchanged: :func:`install_attempt_log` only
records each ``PeerSource``'s attempts (source, bytes written, why it was left).

Reported per fault point: T, origin copies per group (group 0 and the worst group), the
origin's image-data GETs, the hosts whose bytes came from the origin and why (results'
``fallback_reason`` and ``bad_peers``), the hosts the planner quarantined, each resume (the
receiver, the source it left, the bytes written from it, why) with its **re-fetched bytes**:
what the failed source sent that receiver less what the receiver wrote from it (an upper
bound: it includes what sat in the two kernels' socket buffers), and each host's base
hashed after the point (sha512 = the image's) with no partial file left.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any

MIB = 1024 * 1024
FAULTS = ("kill", "stall", "liar")
#: Which holder of group 0 misbehaves: the group's first (its image-service slot) or second.
FAULT_SOURCES = ("first", "second")
#: Bytes handed to the kernel at once by an armed source.
PIECE = 64 * 1024
#: The receivers' largest read chunk (``[glance] download_chunk_size``, 4 MiB, as from the
#: image service): a resume may re-fetch at most this much.
ONE_CHUNK = 4 * 1024 * 1024

#: image id -> the last ``PeerSource`` download's attempts (host process only).
_ATTEMPTS: dict[str, list[dict[str, Any]]] = {}


def install_attempt_log() -> None:
    """Record the attempts of every ``PeerSource`` download of this process by image id."""
    from fleetcache.compute.peers import source

    original = source.PeerSource.download
    if getattr(original, "_bench_logged", False):
        return

    def download(self: Any, ctxt: Any, meta: Any, writer: Any, progress: Any = None) -> int:
        try:
            return original(self, ctxt, meta, writer, progress)
        finally:
            _ATTEMPTS[meta.id] = [dataclasses.asdict(a) for a in self.attempts]

    download._bench_logged = True  # type: ignore[attr-defined]
    source.PeerSource.download = download  # type: ignore[method-assign]


class HostFaults:
    """In a compute's process: the fault armed on its image server, and the checks after a
    point (``fault_*`` control commands of ``bench/p2p_hosts.py``'s ``host_main``)."""

    def __init__(self, server: Any, make_server: Callable[[], Any], cache: Any,
                 origin: Any) -> None:
        self.server = server
        self._make_server = make_server
        self.cache = cache
        self.lock = threading.Lock()
        self._reset()
        self._wrap(server)
        self._wrap_origin(origin)
        install_attempt_log()

    def _reset(self) -> None:
        self.kind: str | None = None
        self.after = 0
        self.stall = 0.0
        self.fired_at: float | None = None
        self.killed = False
        #: Set when a kill fires: the host's own download fails from then on.
        self.dead = False
        self.sent = 0
        self.sent_to: dict[str, int] = {}
        #: Bytes this host wrote from the origin while the fault was armed.
        self.from_origin = 0

    def _wrap(self, server: Any) -> None:
        original = server._send_span

        def send_span(sock: Any, f: Any, offset: int, count: int) -> int:
            if self.kind is None:
                return int(original(sock, f, offset, count))
            return self._send(sock, f, offset, count)

        server._send_span = send_span

    def _wrap_origin(self, origin: Any) -> None:
        """The host's downloads from the origin: counted while a fault is armed, and failing
        at their next chunk once the host was killed."""
        from fleetcache.common import exception

        original = origin.download_from
        faults = self

        def download_from(ctxt: Any, meta: Any, writer: Any, offset: int,
                          progress: Any = None) -> int:
            class Dying:
                def write(self, data: Any, /) -> int:
                    if faults.dead:
                        raise exception.ImageFetchError(image_id=meta.id,
                                                        reason="bench fault: the host died")
                    if faults.kind is not None:
                        with faults.lock:
                            faults.from_origin += len(data)
                    return int(writer.write(data))

            return int(original(ctxt, meta, Dying(), offset, progress))

        origin.download_from = download_from

    def _send(self, sock: Any, f: Any, offset: int, count: int) -> int:
        remote = str(sock.getpeername()[0])
        sent = 0
        while sent < count:
            data = os.pread(f.fileno(), min(PIECE, count - sent), offset + sent)
            if not data:
                break
            self._before_piece()
            if self.kind == "liar":
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            sock.sendall(data)
            sent += len(data)
            with self.lock:
                self.sent += len(data)
                self.sent_to[remote] = self.sent_to.get(remote, 0) + len(data)
        return sent

    def _before_piece(self) -> None:
        """Fire the armed ``kill`` or ``stall`` once S/2 bytes went out."""
        with self.lock:
            fire = (self.kind in ("kill", "stall") and self.fired_at is None
                    and self.sent >= self.after)
            if fire:
                self.fired_at = time.time()
            if self.kind == "kill" and self.fired_at is not None:
                self.dead = True
                if fire:
                    threading.Thread(target=self._kill, daemon=True).start()
                raise ConnectionAbortedError("bench fault: the source was killed")
        if fire:  # a stall: this upload sends nothing for a while
            time.sleep(self.stall)

    def _kill(self) -> None:
        self.server.stop()
        self.killed = True

    def command(self, cmd: str, args: Any) -> Any:
        if cmd == "fault_arm":
            with self.lock:
                self._reset()
                self.kind, self.after, self.stall = args
            return None
        if cmd == "fault_heal":  # the point ended: report, and serve again if killed
            with self.lock:
                out = {"kind": self.kind, "fired_at": self.fired_at, "sent": self.sent,
                       "sent_to": dict(self.sent_to), "from_origin": self.from_origin}
                self.kind = None
            while self.fired_at is not None and out["kind"] == "kill" and not self.killed:
                time.sleep(0.05)
            out["killed"] = self.killed
            if self.killed:
                server = self._make_server()
                server.start()
                self._wrap(server)
                self.server = server
            with self.lock:
                self._reset()
            return out
        if cmd == "fault_attempts":
            return _ATTEMPTS.pop(args, [])
        if cmd == "fault_verify":
            return self._verify(*args)
        raise ValueError(cmd)

    def _verify(self, image_id: str, sha512: str) -> dict[str, Any]:
        """Whether the published base is the image (its sha512), and any partial file of it
        left in the cache directory."""
        from fleetcache.compute.imagecache.layout import partial_prefix

        digest = hashlib.sha512()
        try:
            with open(self.cache.path_for(image_id), "rb") as f:
                while block := f.read(4 * MIB):
                    digest.update(block)
            ok = digest.hexdigest() == sha512
        except FileNotFoundError:
            ok = False
        prefix = partial_prefix(image_id)
        partials = [n for n in os.listdir(self.cache.base_dir) if n.startswith(prefix)]
        return {"hash_ok": ok, "partials": partials}


# -- the driver -------------------------------------------------------------------------------

class FaultRun:
    """One fault point, driver side: arms the victim, then gathers what happened."""

    def __init__(self, kind: str, size: int, stall: float, source: str = "first") -> None:
        self.kind = kind
        self.size = size
        self.stall = stall
        self.source = source
        self.victim: Any = None
        self.planner: Any = None
        self._lock = threading.Lock()

    def on_assigned(self, host: Any, assignment: Any) -> None:
        """Called in ``host``'s thread between the planner's ``assign`` and its
        ``cache_images``: the group's first image-service slot makes it the victim (the
        first holder), or, for the second holder, the group's first host given a peer."""
        chosen = assignment.origin_slot if self.source == "first" else bool(assignment.peers)
        if host.group != 0 or not chosen:
            return
        with self._lock:
            if self.victim is not None:
                return
            self.victim = host
        after = 0 if self.kind == "liar" else self.size // 2
        host.control("fault_arm", (self.kind, after, self.stall))

    def collect(self, hosts: list[Any], image_id: str, sha512: str,
                results: dict[str, tuple[dict[str, Any], float, float]],
                started: float) -> dict[str, Any]:
        victim = self.victim
        stats = victim.control("fault_heal") if victim is not None else {}
        resumes = []
        verified = partial = 0
        dead = victim.name if victim is not None and stats.get("killed") else None
        for host in hosts:
            attempts = host.control("fault_attempts", image_id)
            check = host.control("fault_verify", (image_id, sha512))
            verified += bool(check["hash_ok"]) or host.name == dead
            partial += len(check["partials"])
            # What the victim sent this host less what it wrote of them, over all its
            # attempts at the victim: shown once, at its first attempt left.
            from_victim = sum(a["bytes"] for a in attempts
                              if victim is not None and a["host"] == victim.name)
            shown = False
            for i, attempt in enumerate(attempts):
                if attempt["outcome"] == "done" or not attempt["peer"]:
                    continue
                nxt = attempts[i + 1]["host"] if i + 1 < len(attempts) else None
                reason = results[host.name][0].get("fallback_reason") or ""
                if nxt is None:
                    nxt = "origin (from byte 0)" if not reason.startswith(
                        ("peer_failed", "peer_absent")) else "origin"
                refetch = None
                if victim is not None and attempt["host"] == victim.name and not shown:
                    shown = True
                    refetch = stats.get("sent_to", {}).get(host.address, 0) - from_victim
                resumes.append({"host": host.name, "left": attempt["host"],
                                "written": attempt["bytes"], "why": attempt["outcome"][:60],
                                "next": nxt, "refetched": refetch})
        from_origin, refused_then_peer = {}, []
        for name, (result, _, _) in results.items():
            reason = result.get("fallback_reason")
            if origin_bytes(result) > 0 or (name == dead and stats.get("from_origin")):
                from_origin[name] = (f"{reason}" if reason else "origin slot")
            elif reason:
                refused_then_peer.append(f"{name} [{reason}]")
        quarantined = [h.name for h in hosts
                       if self.planner is not None and h.name in self.planner.quarantine]
        return {"kind": self.kind, "source": self.source,
                "victim": victim.name if victim is not None else None,
                "fired_after_s": (stats["fired_at"] - started) if stats.get("fired_at")
                else None,
                "killed": stats.get("killed"), "victim_sent": stats.get("sent", 0),
                "dead": dead, "victim_from_origin": stats.get("from_origin", 0),
                "resumes": resumes, "from_origin": from_origin,
                "fell_back_to_peers": refused_then_peer,
                "bad_peers": sorted({str(b) for r, _, _ in results.values()
                                     for b in r.get("bad_peers") or []}),
                "quarantined": quarantined, "verified": verified, "hosts": len(hosts),
                "partials": partial}


def origin_bytes(result: dict[str, Any], died_with: int | None = None) -> int:
    """The bytes ``result``'s host took from the origin: what peers did not send of what it
    fetched (refused peer bytes and the copy after them included); for a host killed by the
    fault, ``died_with``, what it wrote from the origin before it died (its failed result
    counts none)."""
    if died_with is not None:
        return died_with
    return int(result.get("bytes_downloaded") or 0) - int(result.get("bytes_from_peers") or 0)


def report(points: list[Any], size: int, summary: dict[tuple[str, int, int], float]) -> None:
    """Print the fault points beside the fault-free median of the same mode."""
    faulty = [p for p in points if p.fault]
    if not faulty:
        return
    print("fault runs (one source of group 0 faulty; beside the fault-free median of the same "
          "mode and point):")
    by_key: dict[tuple[str, str, int, int], list[Any]] = {}
    for p in faulty:
        kind = p.fault["kind"] + ("" if p.fault["source"] == "first" else "@2nd")
        by_key.setdefault((kind, p.base_mode, p.groups, p.hosts), []).append(p)
    for (kind, mode, groups, n), rows in sorted(by_key.items()):
        walls = sorted(p.wall for p in rows)
        med = median_of(walls)
        base = summary.get((mode, groups, n), math.nan)
        g0 = [p.origin_log[0] / size for p in rows]
        worst_g = [max(p.origin_log) / size for p in rows]
        per_group = [sum(p.origin_log) / size / p.groups for p in rows]
        refetch = [r["refetched"] for p in rows for r in p.fault["resumes"]
                   if r["refetched"] is not None]
        verified = all(p.fault["verified"] == p.fault["hosts"] and not p.fault["partials"]
                       and not p.errors for p in rows)
        invalid = sum(p.invalid for p in rows)
        print(f"  {kind:>9} {mode:>17} G={groups} N={n:>2}: T {med:.2f} s (worst {walls[-1]:.2f}"
              f"; fault-free {base:.2f}); origin copies group 0 {median_of(g0):.3f} (worst "
              f"{max(g0):.3f}), per group {median_of(per_group):.3f} (worst "
              f"{max(per_group):.3f}), worst group {max(worst_g):.3f}, target <= 1.05: "
              f"{'met' if max(per_group) <= 1.05 else 'EXCEEDED'}; GETs "
              f"{[sum(p.origin_gets) for p in rows]}; re-fetched per resume "
              + (f"max {max(refetch) / MIB:.3f} MiB (<= 1 chunk {ONE_CHUNK / MIB:g} MiB: "
                 f"{'yes' if max(refetch) <= ONE_CHUNK else 'NO'})" if refetch else "n/a")
              + f"; every host verified, nothing partial: {'yes' if verified else 'NO'}"
              + (f"; INVALID {invalid}/{len(rows)}" if invalid else ""))
        for i, p in enumerate(rows):
            for line in round_lines(p, f"round {i + 1}: "):
                print(f"      {line}")


def round_lines(p: Any, prefix: str = "") -> list[str]:
    """What happened in fault point ``p``: the victim, the hosts that used the origin and
    why, the quarantine, the checks, then one line per resume."""
    f = p.fault
    fired = (f"{f['fired_after_s']:.2f} s" if f["fired_after_s"] is not None
             else "from the start" if f["kind"] == "liar" else "never")
    died = (f", died having written {f['victim_from_origin'] / MIB:.1f} MiB from the origin"
            if f.get("dead") else "")
    lines = [f"{prefix}T {p.wall:.2f}; victim {f['victim']} (fired {fired}, sent "
             f"{f['victim_sent'] / MIB:.1f} MiB{died}); origin per group "
             f"{[round(b / MIB, 1) for b in p.origin_log]} MiB by {len(f['from_origin'])} "
             "host(s): " + ", ".join(f"{h} [{why[:70]}]" for h, why
                                      in sorted(f["from_origin"].items()))
             + (f"; from peers after a fallback: {', '.join(f['fell_back_to_peers'])}"
                if f.get("fell_back_to_peers") else "")
             + f"; bad_peers {f['bad_peers']}; quarantined {f['quarantined']}; verified "
             f"{f['verified']}/{f['hosts']}, partial files {f['partials']}"]
    asked_again: dict[str, int] = {}
    for r in f["resumes"]:
        if not r["written"] and r["why"].startswith("HTTP 503"):  # told to ask again
            asked_again[r["host"]] = asked_again.get(r["host"], 0) + 1
            continue
        refetched = ("" if r["refetched"] is None
                     else f", re-fetched {r['refetched'] / MIB:.3f} MiB")
        lines.append(f"  resume: {r['host']} left {r['left']} after {r['written'] / MIB:.2f} "
                     f"MiB written ({r['why']}) -> {r['next']}{refetched}")
    if asked_again:
        lines.append("  503 (busy, or not that far yet; asked again): " + ", ".join(
            f"{host} x{count}" for host, count in sorted(asked_again.items())))
    return lines


def median_of(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
