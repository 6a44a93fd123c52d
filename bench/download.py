#!/usr/bin/env python3
"""Download throughput of one compute caching a large image from the real Glance (issues 3, 12).

Uploads a ``--size-mib`` image of random bytes to Glance (the local stack's, by default
http://127.0.0.1:19292: ``tools/stack.sh up``), then, for ``--rounds`` rounds, on the same image
and the same disk, one after the other (the order rotates), each from the same state (the
previous copy removed, no dirty page left to write back: :func:`settle`):

* ``curl -o FILE``: no verification, not durable: the transport's limit, the headline's
  denominator (issue 12);
* ``curl -o FILE && sync FILE``: the same made durable, as fleetcache's file is: the limit of
  the disk for a durable copy (informative);
* ``curl | tee FILE | <algo>sum``: one-pass verification with coreutils, the hash being the
  image's ``os_hash_algo`` (the digest is checked against Glance's ``os_hash_value``): issue
  3's baseline, kept beside the headline;
* ``... && sync FILE``: the same, made durable (informative);
* fleetcache: the disk driver's ``cache_image`` in this process, the full pipeline (Glance
  HTTP source, the image's multihash and size verified and the format detected while
  streaming, fsync, format rules (no ``qemu-img`` for this raw image), rename into ``_base``).
  Its reads per
  byte cached come from ``/proc/self/io`` (reaped children, i.e. qemu-img, included):
  ``read_bytes``, fetched from storage (0 plus the header reads that miss the page cache), and
  ``rchar``, every byte that went through file read calls, page cache hits included (the
  socket's ``recv`` is not counted): 1.0 would mean the file was read back once; fleetcache's
  target is 0 plus the inspector's and qemu-img's header reads (and qemu-img's start-up).
* from a peer (issue 22): ``curl -o`` of the same image from a compute's image server
  (another ``ImageCache`` of this process that holds it, served by its ``PeerServer`` on
  127.0.0.1 with a credential for the run), and fleetcache caching it with that peer as its
  source: the same verified, durable pipeline, metadata still from Glance. The peer's round
  limit is the slowest of its ``curl -o``, the one-core hash and the disk, like Glance's;
* fleetcache without its hash (informative): the same pipeline, but the image's metadata as
  the source hands it over loses its hash and MD5 checksum (so only its size is checked):
  what receive, format detection, ``O_DIRECT`` write and fsync reach on their own, i.e.
  whether anything but the hash holds fleetcache below ``curl -o``.

Which hash is verified is Glance's choice (``[DEFAULT] hashing_algorithm``, sha512 by default;
the stack takes ``FLEETCACHE_GLANCE_HASHING_ALGORITHM``): the run prints it (``algo=``), with
one core's hashlib speed of sha512 and sha256 over the same bytes in memory beside it.

A verified download cannot be faster than its hash, which runs on one core (a hash is
sequential), and a durable one cannot be faster than the disk takes a durable write, which
``curl -o`` (into the page cache) never waits for. So each round hashes the image's size in
memory with that algorithm just before and just after each fleetcache variant (one core's
hash on this machine moved by up to 13 % between runs two seconds apart, its other core idle:
measured minutes away, the limit said more about that drift than about fleetcache), and
writes as many bytes with ``dd oflag=direct conv=fsync`` to the same disk just before and just
after it too (a disk whose durable write set the limit moved from 260 to 530 MB/s between
writes seconds apart: one write at the round's end judged the variants by the disk's moment):
a variant's *limit* is the slowest of ``curl -o``, the mean of its two hashes and the mean of
its two writes. The run prints how far apart each pair was (``hash_drift_max``,
``disk_drift_max``): how well a round's limit is known. After its variants a round writes
once more (``disk_mbps``, the disk over ``curl -o``), hashes once more, then hashes while
``curl -o /dev/null`` receives the image on the other CPUs, then once more
(``bench/_hash_limits.py``): that hash over the limit with the mean of the two around it is
what a download whose pipeline cost nothing would reach in the round
(``free_pipeline_of_limit``, informative: whether the target was within reach at all). The
round's hash after all this is printed too (``hash_allows_target`` uses it).
Per round the run prints fleetcache over ``curl -o``
and over the limit; the headline counts the rounds in which 0.9 of ``curl -o`` was within
the one-core hash at all (``hash_allows_target``), and within both hash and disk
(``limit_allows_target``).

Prints the median throughputs (MB = 10^6 bytes), each variant's worst round, and last the
headline ``download: ... ratio=R``, R = fleetcache's throughput over plain ``curl -o``
(``verify_ratio``: over ``curl | tee | <algo>sum``; ``durable_ratio``: over ``curl -o &&
sync``). Every file it wrote (the copies, the upload's source) is removed, and the Glance
image deleted, at the end.

Run: ``.venv/bin/python bench/download.py [--size-mib 1024]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import (  # noqa: E402
    REPO,
    check_and_remove,
    headline,
    loadavg,
    log,
    median,
    parse_with_smoke,
    stack_pids,
    tree_cpu,
)
from _glance import (  # noqa: E402
    CHUNK,
    glance_image,
    stack_env,
    stack_token,
    token_header_file,
)
from _hash_limits import hash_beside_receive, hash_ceiling  # noqa: E402

if TYPE_CHECKING:
    from oslo_config import cfg

    from fleetcache.common.context import RequestContext
    from fleetcache.compute.rpcapi import Peer
    from fleetcache.image.source import ImageMeta, ImageSource


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--glance-url", default="http://127.0.0.1:19292")
    parser.add_argument("--workdir", default="/var/tmp",
                        help="where the copies are written (one disk for all three)")
    parser.add_argument("--stack-dir", default=os.environ.get("FLEETCACHE_STACK_DIR",
                                                              str(REPO / ".stack")),
                        help="the local stack's directory: its env (the admin's credentials) "
                        "and Glance's pid (its CPU)")
    return parse_with_smoke(parser, {"size_mib": 8, "rounds": 1})


def curl_plain(url: str, dest: Path, header: Path) -> None:
    subprocess.run(["curl", "-sSf", "-H", f"@{header}", "-o", str(dest), url], check=True)


def curl_sync(url: str, dest: Path, header: Path) -> None:
    curl_plain(url, dest, header)
    subprocess.run(["sync", str(dest)], check=True)


#: coreutils' tool of each os_hash_algo the bench knows.
SUM_TOOLS = {"sha512": "sha512sum", "sha256": "sha256sum", "sha384": "sha384sum",
             "sha1": "sha1sum", "md5": "md5sum"}


def curl_verify(url: str, dest: Path, header: Path, algo: str, expected: str,
                fsync: bool = False) -> None:
    script = (f'curl -sSf -H "@$3" "$1" | tee "$2" | {SUM_TOOLS[algo]}'
              + (' && sync "$2"' if fsync else ""))
    out = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script, "-", url, str(dest), str(header)],
        check=True, capture_output=True, text=True).stdout
    if out.split()[0] != expected:
        raise RuntimeError(f"curl | tee | {SUM_TOOLS[algo]}: digest differs from Glance's "
                           "os_hash_value")


class Fleetcache:
    """The compute side, in process: the disk driver's ``cache_image`` from Glance.

    ``hashed=False`` gives it a Glance source whose images have no hash or checksum (only
    their size is verified): the pipeline's speed without its one sequential step.
    """

    def __init__(self, glance: str, token: str, instances_path: Path,
                 hashed: bool = True) -> None:
        from oslo_config import cfg

        from fleetcache.common import config, context
        from fleetcache.compute.virt import disk
        from fleetcache.image.glance import GlanceImageSource

        conf = cfg.ConfigOpts()
        config.register_all(conf)
        conf([], project="fleetcache", default_config_files=[])
        conf.set_override("instances_path", str(instances_path))
        conf.set_override("backend", "glance", group="image_source")
        conf.set_override("api_servers", [glance], group="glance")
        source = GlanceImageSource(conf) if hashed else _unhashed_glance(conf)
        self.driver = disk.DiskDriver(conf, source)
        self.driver.init_host("fcbench")
        self.ctxt = context.get_admin_context()
        self.ctxt.auth_token = token  # Glance is behind Keystone: the caller's token
        self.disk_reads: list[int] = []  # /proc/self/io read_bytes of each fetch
        self.all_reads: list[int] = []  # /proc/self/io rchar of each fetch

    def fetch(self, image_id: str, peers: Sequence[Peer] = ()) -> Path:
        before = proc_io()
        outcome = self.driver.cache_image(self.ctxt, image_id, peers=peers)
        after = proc_io()
        self.disk_reads.append(after["read_bytes"] - before["read_bytes"])
        self.all_reads.append(after["rchar"] - before["rchar"])
        if not outcome.downloaded:
            raise RuntimeError("fleetcache found the image already cached")
        if peers and outcome.download_path != "peer":
            raise RuntimeError(f"the image did not come from the peer: {outcome}")
        return Path(self.driver.image_cache.path_for(image_id))

    @contextlib.contextmanager
    def serving(self, image_id: str) -> Iterator[tuple[Peer, str]]:
        """Hold ``image_id`` and serve it from a ``PeerServer`` on 127.0.0.1 (an ephemeral
        port) for the block. :returns: the peer a receiver is given, and the value of the
        ``Authorization`` header for ``curl``."""
        from fleetcache.common import peer_tokens
        from fleetcache.compute.peers import PeerServer, ServeGrants
        from fleetcache.compute.rpcapi import Peer

        self.fetch(image_id)
        conf = self.driver.conf
        conf.set_override("peer_listen_address", "127.0.0.1", group="image_cache")
        conf.set_override("peer_listen_port", 0, group="image_cache")
        grants, key, job = ServeGrants(), peer_tokens.new_key(), str(uuid.uuid4())
        until = time.time() + 86400
        grants.open(job, key, [image_id], until)
        server = PeerServer(conf, self.driver.image_cache, grants)
        server.start()
        try:
            authorization = peer_tokens.mint(key, peer_tokens.PeerClaims(
                job=job, image_id=image_id, requester="fcbench-receiver", requester_ip=None,
                server=conf.host, expires=until))
            yield (Peer(host=conf.host, url=server.url, authorization=authorization),
                   authorization)
        finally:
            server.stop()


def _unhashed_glance(conf: cfg.ConfigOpts) -> ImageSource:
    """A Glance source whose images come without ``os_hash_*`` and ``checksum``."""
    import dataclasses

    from fleetcache.image.glance import GlanceImageSource

    class UnhashedGlance(GlanceImageSource):
        def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
            return dataclasses.replace(super().show(ctxt, image_id), checksum=None,
                                       os_hash_algo=None, os_hash_value=None)

    return UnhashedGlance(conf)


def proc_io() -> dict[str, int]:
    """This process's I/O counters (``read_bytes``: bytes really fetched from storage)."""
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (line.split(": ") for line in f)}


def round_limit(curl: float, hashes: tuple[float, float],
                disks: tuple[float, float]) -> float:
    """A round's limit (MB/s): the slowest of ``curl -o``, the mean of the one-core hashes
    just before and just after the measured variant, and the mean of the disk's durable
    writes just before and just after it."""
    return min(curl, sum(hashes) / 2, sum(disks) / 2)


def disk_ceiling(dest: Path, size: int) -> float:
    """MB/s of a durable write of ``size`` zeros to ``dest`` (``dd``, 4 MiB blocks, ``O_DIRECT``
    and fsync, as fleetcache writes its copy): the disk's limit for any durable copy."""
    started = time.monotonic()
    subprocess.run(["dd", "if=/dev/zero", f"of={dest}", f"bs={CHUNK}",
                    f"count={-(-size // CHUNK)}", "oflag=direct", "conv=fsync", "status=none"],
                   check=True)
    rate = size / (time.monotonic() - started) / 1e6
    dest.unlink()
    return rate


def settle() -> None:
    """Start a variant as every other starts: no copy of an earlier one on disk or in the page
    cache (each is removed after it), and no dirty page of anyone's left to write back.

    NOTE: with the copies of a round kept until its end, the variants after an unsynced one
    paid for its write-back (``curl -o`` after others ran at a third of its speed), so a
    round's ratio said more about its order than about fleetcache (docs/performance.md,
    "Download from Glance").
    """
    os.sync()


def timed(func: Callable[[], object]) -> tuple[float, float]:
    """Wall and this process's CPU (with its children's) seconds of ``func()``."""
    def cpu() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    cpu0, started = cpu(), time.monotonic()
    func()
    return time.monotonic() - started, cpu() - cpu0


def main() -> int:
    args = parse_args()
    size = args.size_mib * 1024 * 1024
    load_before = loadavg()
    work = Path(tempfile.mkdtemp(prefix="fcbench-download-", dir=args.workdir))
    names = ("curl -o", "curl -o && sync", "curl|tee|sum", "...+sync FILE", "fleetcache",
             "fleetcache, no hash", "curl -o (peer)", "fleetcache (peer)")
    walls: dict[str, list[float]] = {k: [] for k in names}
    cpus: dict[str, list[float]] = {k: [] for k in walls}
    glance_cpus: dict[str, list[float]] = {k: [] for k in walls}
    glance_pid = stack_pids(args.stack_dir).get("glance")
    round_hash: list[float] = []  # MB/s of one core's hash of the image's algo, per round
    #: MB/s of one core's hash just before and just after each fleetcache variant, per round:
    #: their mean is its own limit's hash.
    beside: dict[str, list[tuple[float, float]]] = {"fleetcache": [], "fleetcache (peer)": []}
    #: MB/s of the disk's durable write just before and just after each fleetcache variant,
    #: per round: their mean is its own limit's disk.
    disk_beside: dict[str, list[tuple[float, float]]] = {k: [] for k in beside}
    #: MB/s of one core's hash while curl receives the image on the other CPUs, and of one
    #: core's hash just before it and after it (the round's), per round.
    receiving: list[tuple[float, float, float]] = []
    round_disk: list[float] = []  # MB/s of a durable direct write to the same disk, per round
    try:
        token = stack_token(stack_env(args.stack_dir))
        header = token_header_file(token, work)
        with glance_image(args.glance_url, size, work, "fcbench-download", token) as image:
            image_id, expected = str(image["id"]), str(image["os_hash_value"])
            algo = str(image["os_hash_algo"])
            url = f"{args.glance_url}/v2/images/{image_id}/file"
            fleetcache = Fleetcache(args.glance_url, token, work / "instances")
            unhashed = Fleetcache(args.glance_url, token, work / "instances-unhashed",
                                  hashed=False)
            receiver = Fleetcache(args.glance_url, token, work / "instances-receiver")
            holder = Fleetcache(args.glance_url, token, work / "instances-holder")
            curl_plain(url, work / "warm", header)  # warm Glance's page cache and worker
            (work / "warm").unlink()
            with holder.serving(image_id) as (peer, authorization):
                peer_url = f"{peer['url']}/v1/images/{image_id}"
                peer_header = work / "peer.header"
                peer_header.write_text(f"Authorization: {authorization}\n")
                peer_header.chmod(0o600)
                # Warm the holder's copy as Glance's: the holder wrote it with O_DIRECT, so
                # the first receiver read it from the disk it was writing to (224 against
                # 291-304 MB/s in the later fetches), which two hosts never share.
                curl_plain(peer_url, work / "warm", peer_header)
                (work / "warm").unlink()
                for rnd in range(args.rounds):
                    runs: dict[str, Callable[[], object]] = {
                        "curl -o": lambda: curl_plain(url, work / "plain", header),
                        "curl -o && sync": lambda: curl_sync(url, work / "plainsync", header),
                        "curl|tee|sum": lambda: curl_verify(url, work / "tee", header, algo,
                                                            expected),
                        "...+sync FILE": lambda: curl_verify(url, work / "teesync", header, algo,
                                                             expected, True),
                        "fleetcache": lambda: fleetcache.fetch(image_id),
                        "fleetcache, no hash": lambda: unhashed.fetch(image_id),
                        "curl -o (peer)": lambda: curl_plain(peer_url, work / "peerplain",
                                                             peer_header),
                        "fleetcache (peer)": lambda: receiver.fetch(image_id, [peer]),
                    }
                    copies = {"curl -o": work / "plain", "curl -o && sync": work / "plainsync",
                              "curl|tee|sum": work / "tee", "...+sync FILE": work / "teesync",
                              "fleetcache": Path(fleetcache.driver.image_cache.path_for(image_id)),
                              "fleetcache, no hash":
                                  Path(unhashed.driver.image_cache.path_for(image_id)),
                              "curl -o (peer)": work / "peerplain",
                              "fleetcache (peer)":
                                  Path(receiver.driver.image_cache.path_for(image_id))}
                    # Rotate the order so that no variant always comes first in a round.
                    order = list(runs)[rnd % len(runs):] + list(runs)[:rnd % len(runs)]
                    for name in order:
                        around = name in beside  # its limit's hash and disk just around it
                        hash_before = hash_ceiling(size, algo)[0] if around else 0.0
                        disk_before = disk_ceiling(work / "dd", size) if around else 0.0
                        settle()
                        before = tree_cpu(glance_pid) if glance_pid else 0.0
                        wall, cpu = timed(runs[name])
                        walls[name].append(wall)
                        cpus[name].append(cpu)
                        glance_cpus[name].append(
                            tree_cpu(glance_pid) - before if glance_pid else float("nan"))
                        if around:
                            beside[name].append((hash_before, hash_ceiling(size, algo)[0]))
                        check_and_remove([copies[name]], size)
                        if around:
                            settle()
                            disk_beside[name].append(
                                (disk_before, disk_ceiling(work / "dd", size)))
                    receive_before = hash_ceiling(size, algo)[0]
                    received = hash_beside_receive(url, header, algo)
                    round_hash.append(hash_ceiling(size, algo)[0])
                    receiving.append((received, receive_before, round_hash[-1]))
                    settle()
                    round_disk.append(disk_ceiling(work / "dd", size))
                    log(f"round {rnd + 1}: " + ", ".join(
                        f"{k} {size / walls[k][-1] / 1e6:.0f} MB/s" for k in names)
                        + f", {algo} in memory (1 core) {round_hash[-1]:.0f} MB/s (before/after "
                        + ", ".join(f"{k} {v[-1][0]:.0f}/{v[-1][1]:.0f}"
                                    for k, v in beside.items())
                        + f", the receive {receive_before:.0f}/{round_hash[-1]:.0f}; beside "
                        f"a receive {received:.0f}), dd oflag=direct "
                        f"conv=fsync {round_disk[-1]:.0f} MB/s (before/after "
                        + ", ".join(f"{k} {v[-1][0]:.0f}/{v[-1][1]:.0f}"
                                    for k, v in disk_beside.items()) + ")")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mbps = {k: size / median(v) / 1e6 for k, v in walls.items()}
    worst = {k: size / max(v) / 1e6 for k, v in walls.items()}
    ceilings = {a: hash_ceiling(size, a) for a in ("sha512", "sha256")}
    if algo not in ceilings:
        ceilings[algo] = hash_ceiling(size, algo)
    print(f"image {size} bytes, os_hash_algo {algo}, {args.rounds} rounds, Glance "
          f"{args.glance_url}, disk {args.workdir}, loadavg {load_before}->{loadavg()} at "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for name in names:
        label = name.replace("sum", f"{algo}sum") if "tee" in name else name
        print(f"{label:>20}: {mbps[name]:7.0f} MB/s median, {worst[name]:5.0f} worst "
              f"(median {median(walls[name]):.2f} s; CPU-s per GiB: client "
              f"{median(cpus[name]) / size * 2**30:.2f}, Glance "
              f"{median(glance_cpus[name]) / size * 2**30:.2f})")
    for name, (rate, cpu) in ceilings.items():
        print(f"{name + ' (1 core)':>20}: {rate:7.0f} MB/s  ({cpu / size * 2**30:.2f} CPU-s per "
              "GiB: hashlib over the same bytes in memory)")
    disk_read = median([float(n) for n in fleetcache.disk_reads])
    all_read = median([float(n) for n in fleetcache.all_reads])
    print(f"fleetcache per image (median): {disk_read:.0f} bytes read from disk "
          f"({disk_read / size:.6f} per byte cached), {all_read:.0f} bytes through read calls "
          f"({all_read / size:.6f} per byte cached)")
    ratios = [c / f for c, f in zip(walls["curl -o"], walls["fleetcache"], strict=True)]
    curl_rounds = [size / w / 1e6 for w in walls["curl -o"]]
    limits = [round_limit(c, h, d) for c, h, d in zip(
        curl_rounds, beside["fleetcache"], disk_beside["fleetcache"], strict=True)]
    of_limit = [size / w / 1e6 / lim
                for w, lim in zip(walls["fleetcache"], limits, strict=True)]
    allowed = sum(h >= 0.9 * c for c, h in zip(curl_rounds, round_hash, strict=True))
    limit_allowed = sum(lim >= 0.9 * c for c, lim in zip(curl_rounds, limits, strict=True))
    print("fleetcache / curl -o per round: " + ", ".join(f"{r:.3f}" for r in ratios))
    print(f"{algo} (1 core) / curl -o per round: "
          + ", ".join(f"{h / c:.3f}" for c, h in zip(curl_rounds, round_hash, strict=True))
          + f" ({allowed} of {len(round_hash)} rounds at >= 0.9: where a verified download "
          "could reach the target at all)")
    print("disk (dd oflag=direct conv=fsync) / curl -o per round: "
          + ", ".join(f"{d / c:.3f}" for c, d in zip(curl_rounds, round_disk, strict=True)))
    print("fleetcache / min(curl -o, one-core hash, disk) per round: "
          + ", ".join(f"{r:.3f}" for r in of_limit)
          + f" ({limit_allowed} of {len(limits)} rounds with hash and disk >= 0.9 of curl -o)")
    peer_curl = [size / w / 1e6 for w in walls["curl -o (peer)"]]
    peer_limits = [round_limit(c, h, d) for c, h, d in zip(
        peer_curl, beside["fleetcache (peer)"], disk_beside["fleetcache (peer)"], strict=True)]
    peer_of_limit = [size / w / 1e6 / lim
                     for w, lim in zip(walls["fleetcache (peer)"], peer_limits, strict=True)]
    print("fleetcache from a peer / min(curl -o of the peer, one-core hash, disk) per round: "
          + ", ".join(f"{r:.3f}" for r in peer_of_limit))
    # A download whose pipeline cost nothing: bound by curl -o, the disk, and the hash at the
    # speed it had beside a receive.
    ideal_of_limit = [min(c, r, d) / round_limit(c, (b, a), (d, d)) for c, (r, b, a), d in zip(
        curl_rounds, receiving, round_disk, strict=True)]
    drift = [abs(a - b) / ((a + b) / 2) for v in beside.values() for b, a in v]
    disk_drift = [abs(a - b) / ((a + b) / 2) for v in disk_beside.values() for b, a in v]
    print(f"{algo} (1 core) just before against just after each fleetcache variant: "
          f"{min(drift):.0%} to {max(drift):.0%} apart; the disk's durable write: "
          f"{min(disk_drift):.0%} to {max(disk_drift):.0%} apart (the limit's own uncertainty)")
    print(f"min(curl -o, {algo} (1 core) beside a receive on the other CPUs, disk) / min(curl "
          "-o, one-core hash, disk) per round: " + ", ".join(f"{r:.3f}" for r in ideal_of_limit)
          + " (a download whose pipeline cost nothing)")
    for label, rounds in (("from Glance", of_limit), ("from a peer", peer_of_limit),
                          ("a free pipeline, by the target's rule (informative)",
                           ideal_of_limit)):
        met = median(rounds) >= 0.9 and min(rounds) >= 0.8
        print(f"target (issue 22), {label}: >= 0.9 of the round's limit in the median round "
              f"and >= 0.8 in the worst: {median(rounds):.3f} and {min(rounds):.3f}: "
              f"{'met' if met else 'NOT met'}")
    unhashed_ratios = [c / f for c, f in zip(walls["curl -o"], walls["fleetcache, no hash"],
                                             strict=True)]
    print("fleetcache without its hash / curl -o per round: "
          + ", ".join(f"{r:.3f}" for r in unhashed_ratios))
    print(headline("download", mbps["fleetcache"] / mbps["curl -o"],
                   size_mib=args.size_mib, algo=algo, curl_mbps=round(mbps["curl -o"]),
                   curl_sync_mbps=round(mbps["curl -o && sync"]),
                   verify_mbps=round(mbps["curl|tee|sum"]),
                   verify_fsync_mbps=round(mbps["...+sync FILE"]),
                   fleetcache_mbps=round(mbps["fleetcache"]),
                   unhashed_mbps=round(mbps["fleetcache, no hash"]),
                   sha512_mbps=round(ceilings["sha512"][0]),
                   sha256_mbps=round(ceilings["sha256"][0]),
                   disk_read_per_byte=round(disk_read / size, 6),
                   read_per_byte=round(all_read / size, 6),
                   verify_ratio=round(mbps["fleetcache"] / mbps["curl|tee|sum"], 3),
                   durable_ratio=round(mbps["fleetcache"] / mbps["curl -o && sync"], 3),
                   worst_round_ratio=round(min(ratios), 3),
                   disk_mbps=round(median(round_disk)),
                   hash_allows_target=f"{allowed}/{len(round_hash)}",
                   limit_allows_target=f"{limit_allowed}/{len(limits)}",
                   of_limit=round(median(of_limit), 3),
                   worst_round_of_limit=round(min(of_limit), 3),
                   unhashed_worst_round_ratio=round(min(unhashed_ratios), 3),
                   peer_curl_mbps=round(mbps["curl -o (peer)"]),
                   peer_mbps=round(mbps["fleetcache (peer)"]),
                   peer_of_limit=round(median(peer_of_limit), 3),
                   peer_worst_round_of_limit=round(min(peer_of_limit), 3),
                   free_pipeline_of_limit=round(median(ideal_of_limit), 3),
                   free_pipeline_worst_round_of_limit=round(min(ideal_of_limit), 3),
                   hash_drift_max=round(max(drift), 3),
                   disk_drift_max=round(max(disk_drift), 3)))
    return 0


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    sys.exit(main())
