#!/usr/bin/env python3
"""What mutual TLS between peers costs one transfer (``[image_cache] peer_ssl_*``, issue 22).

A cached image of ``--size-mib`` random MiB is served by a real ``PeerServer`` (its compute's
``ImageCache`` holds it) on 127.0.0.1 to a client built as a receiving compute builds it
(``fleetcache.compute.peers.source.peer_opener``), first over plain HTTP (``sendfile``), then
over TLS with certificates of one CA made for the run (P-256). Each round reads the whole
body into one 1 MiB buffer, read after read; the first round of each mode warms the page
cache and is left out. Per mode: MB/s and the process's CPU seconds per GiB (both
ends are in this process), median and worst of ``--rounds``; the headline's ratio is TLS
over plain HTTP, both medians.

Run: ``.venv/bin/python bench/peer_tls.py --size-mib 512 --rounds 4`` (``--workdir``,
default ``/var/tmp``).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
import tempfile
import time
import uuid

from _benchlib import headline, loadavg, log, median, parse_with_smoke

# The run's CA comes from the tests' certificate helper (tests/tls_certs.py): one way to
# make fleet certificates in the tree.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from fleetcache.common.context import RequestContext  # noqa: E402
from fleetcache.common.peer_tokens import PeerClaims, mint, new_key  # noqa: E402
from fleetcache.compute.imagecache import ImageCache  # noqa: E402
from fleetcache.compute.peers import PeerServer, ServeGrants  # noqa: E402
from fleetcache.compute.peers import tls as peer_tls  # noqa: E402
from fleetcache.compute.peers.source import peer_opener  # noqa: E402
from fleetcache.demo.harness import make_conf  # noqa: E402
from fleetcache.image.local import LocalImageSource, add_image  # noqa: E402
from tests.tls_certs import TestCA  # noqa: E402

MIB = 1 << 20


def one_mode(workdir: pathlib.Path, image_dir: pathlib.Path, image_id: str,
             ca: TestCA | None, rounds: int) -> list[tuple[float, float]]:
    """(MB/s, CPU s per GiB) of each round after the first, over TLS when ``ca`` is given."""
    server_files = client_files = None
    extra = {}
    if ca is not None:
        server_files, client_files = ca.issue("server"), ca.issue("client")
        extra = {"image_cache.peer_ssl_cert_file": server_files.cert,
                 "image_cache.peer_ssl_key_file": server_files.key,
                 "image_cache.peer_ssl_ca_file": server_files.ca}
    mode = "tls" if ca else "plain"
    conf = make_conf(str(workdir / mode), "server", **{
        "instances_path": str(workdir / mode / "instances"),
        "image_source.local_directory": str(image_dir),
        "image_cache.peer_listen_address": "127.0.0.1", "image_cache.peer_listen_port": 0,
        **extra})
    cache = ImageCache(conf, LocalImageSource(conf))
    cache.fetch(RequestContext(), image_id)
    key, job = new_key(), str(uuid.uuid4())
    grants = ServeGrants()
    grants.open(job, key, [image_id], time.time() + 3600)
    server = PeerServer(conf, cache, grants)
    server.start()
    opener = peer_opener(None if client_files is None else peer_tls.PeerTLSFiles(
        client_files.cert, client_files.key, client_files.ca), 60.0)
    buffer = memoryview(bytearray(MIB))
    figures = []
    try:
        for n in range(rounds + 1):
            auth = mint(key, PeerClaims(job, image_id, "client", "127.0.0.1", "server",
                                        time.time() + 600))
            started, cpu, size = time.monotonic(), time.process_time(), 0
            with opener(f"{server.url}/v1/images/{image_id}", {"Authorization": auth}) as body:
                if body.status != 200:
                    raise RuntimeError(f"the peer answered HTTP {body.status}")
                while n_read := body.readinto(buffer):
                    size += n_read
            wall, cpu = time.monotonic() - started, time.process_time() - cpu
            log(f"{mode} round {n}: {size / wall / 1e6:.0f} MB/s, "
                f"{cpu / (size / 2**30):.2f} CPU-s/GiB{' (warm-up, left out)' if n == 0 else ''}")
            if n:
                figures.append((size / wall / 1e6, cpu / (size / 2**30)))
    finally:
        server.stop()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--workdir", default="/var/tmp")
    args = parse_with_smoke(parser, {"size_mib": 16, "rounds": 1})
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="fc-peer-tls-", dir=args.workdir))
    try:
        source = workdir / "image"
        with source.open("wb") as f:
            for _ in range(args.size_mib):
                f.write(os.urandom(MIB))
        with source.open("rb") as f:
            image_id = add_image(str(workdir / "images"), f).id
        source.unlink()
        log(f"peer_tls: {args.size_mib} MiB, {args.rounds} rounds a mode, load {loadavg()}")
        plain = one_mode(workdir, workdir / "images", image_id, None, args.rounds)
        over_tls = one_mode(workdir, workdir / "images", image_id, TestCA(workdir / "ca"),
                            args.rounds)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for name, figures in (("plain", plain), ("tls", over_tls)):
        speeds, cpus = [f[0] for f in figures], [f[1] for f in figures]
        print(f"{name}: MB/s median {median(speeds):.0f} worst {min(speeds):.0f}; CPU-s/GiB "
              f"median {median(cpus):.2f} worst {max(cpus):.2f}")
    print(headline("peer_tls", median([f[0] for f in over_tls]) / median([f[0] for f in plain]),
                   tls_mbps=median([f[0] for f in over_tls]),
                   plain_mbps=median([f[0] for f in plain]),
                   tls_cpu_per_gib=median([f[1] for f in over_tls]),
                   plain_cpu_per_gib=median([f[1] for f in plain])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
