#!/usr/bin/env python3
"""Direct download from Ceph: fleetcache's rbd path against the raw ``rbd export`` (issue 9).

Needs the local stack (``tools/stack.sh up``: Glance with its rbd store, the throwaway Ceph;
read from ``.stack/env``). Uploads one ``--size-mib`` image of random bytes into Glance's rbd
store, then, for ``--rounds`` rounds, on the same image and the same disk, one after the other
(the order rotates each round):

* ``rbd export`` CLI to a file, then ``sync`` of it: the floor (no verification), as
  ``client.compute`` with the same conf and keyring;
* fleetcache rbd: the disk driver's ``cache_image`` in this process with ``[glance]
  allowed_direct_url_schemes = rbd``: the privileged export (privsep daemon, started once
  before the rounds) streaming through a FIFO into the one-pass pipeline (sha512 multihash and
  size while written, format detection, fsync, format rules + ``qemu-img info``, rename; the
  hash is the image's ``os_hash_algo``, Glance's choice, printed as ``algo=``);
* fleetcache HTTP: the same driver without the direct path, from Glance (whose rbd store reads
  the same Ceph image).

Prints per-round and median throughputs (MB = 10^6 bytes) and last the headline ``rbd: ...
ratio=R``, R = fleetcache rbd throughput / raw CLI throughput (medians), with the worst
round's ratio beside it. Everything written is removed and the image deleted at the end.

Run: ``.venv/bin/python bench/rbd.py [--size-mib 1024] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import (  # noqa: E402
    REPO,
    check_and_remove,
    cpu_with_reaped,
    headline,
    loadavg,
    log,
    median,
    parse_with_smoke,
    stack_pids,
    tree_cpu,
)
from _glance import glance_image, stack_env, stack_token  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stack-dir", default=os.environ.get("FLEETCACHE_STACK_DIR",
                                                              str(REPO / ".stack")))
    parser.add_argument("--workdir", default="/var/tmp",
                        help="where the copies are written (one disk for all three)")
    return parse_with_smoke(parser, {"size_mib": 8, "rounds": 1})


def config_text(env: dict[str, str], instances_path: Path, direct: bool) -> str:
    """The compute's configuration file: Glance over HTTP, and with ``direct`` the rbd path as
    the stack's computes have it (user ``client.compute``, read-only)."""
    text = (f"[DEFAULT]\ninstances_path = {instances_path}\n\n"
            f"[image_source]\nbackend = glance\n\n"
            f"[glance]\napi_servers = {env['FLEETCACHE_GLANCE_URL']}\n")
    if direct:
        text += (f"allowed_direct_url_schemes = rbd\nrbd_user = compute\n"
                 f"rbd_ceph_conf = {env['FLEETCACHE_CEPH_CONF']}\n"
                 f"rbd_keyring = {env['FLEETCACHE_CEPH_KEYRING_COMPUTE']}\n")
    return text


def rbd_cli(env: dict[str, str], image_id: str, dest: Path) -> None:
    subprocess.run(
        ["rbd", "--conf", env["FLEETCACHE_CEPH_CONF"], "--id", "compute", "--keyring",
         env["FLEETCACHE_CEPH_KEYRING_COMPUTE"], "export", "--no-progress",
         f"images/{image_id}@snap", str(dest)], check=True)
    subprocess.run(["sync", str(dest)], check=True)


class Fleetcache:
    """The compute side, in process: the disk driver's ``cache_image``.

    Its options are in a configuration file of its own, as the compute's are: the privileged
    export takes the Ceph user, keyring, ``ceph.conf`` and ``_base`` from the privsep
    daemon's configuration, i.e. the files on the helper's command line
    (:func:`fleetcache.privsep.helper_command`), never from the caller's in-process
    configuration (:mod:`fleetcache.privsep.rbd`).
    """

    def __init__(self, env: dict[str, str], token: str, instances_path: Path,
                 direct: bool) -> None:
        from oslo_config import cfg

        from fleetcache import privsep
        from fleetcache.common import config, context
        from fleetcache.compute.virt import disk

        conf_file = instances_path.parent / f"fleetcache-{instances_path.name}.conf"
        conf_file.write_text(config_text(env, instances_path, direct))
        conf = cfg.ConfigOpts()
        config.register_all(conf)
        conf(["--config-file", str(conf_file)], project="fleetcache", default_config_files=[])
        if direct:
            privsep.configure(conf)  # the daemon reads conf_file, as the compute's does
        self.path = "rbd" if direct else "http"
        self.driver = disk.DiskDriver(conf)
        self.driver.init_host("fcbench")
        self.ctxt = context.get_admin_context()
        self.ctxt.auth_token = token  # Glance is behind Keystone: the caller's token

    def fetch(self, image_id: str) -> Path:
        outcome = self.driver.cache_image(self.ctxt, image_id)
        if not outcome.downloaded or outcome.download_path != self.path:
            raise RuntimeError(f"expected a download over {self.path}, got {outcome}")
        return Path(self.driver.image_cache.path_for(image_id))


def privsep_daemons() -> set[int]:
    """Pids of the privsep daemons running on this machine (``privsep-helper`` forks the
    daemon off and exits, so ours is no child of this process: it is the one that appears
    when the first direct fetch starts it)."""
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if b"privsep-helper" in f.read():
                        pids.add(int(entry))
            except OSError:
                continue
    return pids


def other_cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU-s so far of the stack's Glance (process tree), the OSD and the privsep daemon (with
    the ``rbd`` processes it reaped)."""
    out = {}
    for name, pid in pids.items():
        try:
            out[name] = cpu_with_reaped(pid) if name == "privsep" else tree_cpu(pid)
        except OSError:
            out[name] = float("nan")
    return out


def cpu_seconds() -> float:
    """User + system CPU of this process and its reaped children (the CLI's ``rbd``; not the
    privsep daemon's, which is no child of ours)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> int:
    args = parse_args()
    env = stack_env(args.stack_dir)
    glance = env["FLEETCACHE_GLANCE_URL"].rstrip("/")
    token = stack_token(env)
    size = args.size_mib * 1024 * 1024
    load_before = loadavg()
    work = Path(tempfile.mkdtemp(prefix="fcbench-rbd-", dir=args.workdir))
    names = ("rbd export+sync", "fleetcache rbd", "fleetcache http")
    walls: dict[str, list[float]] = {k: [] for k in names}
    cpus: dict[str, list[float]] = {k: [] for k in names}
    stage_cpus: dict[str, dict[str, list[float]]] = {k: {} for k in names}
    try:
        with glance_image(glance, size, work, "fcbench-rbd", token,
                          store=env.get("FLEETCACHE_GLANCE_RBD_STORE", "ceph")) as image:
            if not str(image.get("direct_url")).startswith("rbd://"):
                raise RuntimeError(f"the upload did not make an rbd image: {image}")
            image_id = str(image["id"])
            algo = str(image["os_hash_algo"])
            direct = Fleetcache(env, token, work / "instances-rbd", direct=True)
            http = Fleetcache(env, token, work / "instances-http", direct=False)
            daemons = privsep_daemons()
            direct.fetch(image_id).unlink()  # starts the privsep daemon, warms the OSD
            pids = stack_pids(args.stack_dir)
            ours = privsep_daemons() - daemons
            if len(ours) == 1:
                pids["privsep"] = ours.pop()
            for rnd in range(args.rounds):
                runs: dict[str, Callable[[], object]] = {
                    "rbd export+sync": lambda: rbd_cli(env, image_id, work / "cli"),
                    "fleetcache rbd": lambda: direct.fetch(image_id),
                    "fleetcache http": lambda: http.fetch(image_id),
                }
                order = list(runs)[rnd % 3:] + list(runs)[:rnd % 3]
                for name in order:
                    others0 = other_cpu(pids)
                    cpu0, started = cpu_seconds(), time.monotonic()
                    runs[name]()
                    walls[name].append(time.monotonic() - started)
                    cpus[name].append(cpu_seconds() - cpu0)
                    others1 = other_cpu(pids)
                    for key in others1:
                        stage_cpus[name].setdefault(key, []).append(others1[key] - others0[key])
                check_and_remove([work / "cli",
                                  Path(direct.driver.image_cache.path_for(image_id)),
                                  Path(http.driver.image_cache.path_for(image_id))], size)
                log(f"round {rnd + 1} ({' -> '.join(order)}): " + ", ".join(
                    f"{k} {size / walls[k][-1] / 1e6:.0f} MB/s" for k in names))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mbps = {k: size / median(v) / 1e6 for k, v in walls.items()}
    ratios = [cli / own for cli, own in zip(walls["rbd export+sync"], walls["fleetcache rbd"],
                                            strict=True)]
    print(f"image {size} bytes in the stack's Ceph, os_hash_algo {algo}, {args.rounds} rounds, "
          f"disk {args.workdir}, loadavg {load_before}->{loadavg()} at "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for name in names:
        rounds = ", ".join(f"{size / w / 1e6:.0f}" for w in walls[name])
        stages = ", ".join(f"{key} {median(v) / size * 2**30:.2f}"
                           for key, v in sorted(stage_cpus[name].items()))
        print(f"{name:>16}: {mbps[name]:7.0f} MB/s median (rounds: {rounds} MB/s); CPU-s per "
              f"GiB: this process and its reaped children {median(cpus[name]) / size * 2**30:.2f}"
              f", {stages}")
    print("fleetcache rbd / rbd export+sync per round: "
          + ", ".join(f"{r:.3f}" for r in ratios))
    print(headline("rbd", mbps["fleetcache rbd"] / mbps["rbd export+sync"],
                   size_mib=args.size_mib, algo=algo, cli_mbps=round(mbps["rbd export+sync"]),
                   fleetcache_rbd_mbps=round(mbps["fleetcache rbd"]),
                   fleetcache_http_mbps=round(mbps["fleetcache http"]),
                   rbd_over_http=round(mbps["fleetcache rbd"] / mbps["fleetcache http"], 3),
                   worst_round_ratio=round(min(ratios), 3)))
    return 0


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    sys.exit(main())
