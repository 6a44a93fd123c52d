#!/usr/bin/env python3
"""qcow2 -> raw conversion of a cached image: fleetcache's path beside plain ``qemu-img convert``.

Builds a qcow2 of ``--size-mib`` virtual MiB, half of it random data in 4 MiB extents and half
holes (a typical cloud image is mostly sparse), then, for ``--rounds`` rounds, on the same file
and the same disk, one after the other (order rotated each round):

* ``qemu-img convert``: ``qemu-img convert -f qcow2 -O raw SRC DST``, plain (qemu-img's default
  cache mode for the output is ``unsafe``: nothing is flushed, the data is still in the page
  cache when it exits);
* ``...+sync``: the same, then ``sync DST``: the durable baseline;
* ``fleetcache``: what the image cache does with a downloaded qcow2 that a ``flat`` backend
  needs as raw, in this process: ``inspect_image`` (format inspector on the headers,
  ``qemu-img info`` and ``qemu-img check`` under limits), then
  ``imagecache.publish`` = ``imagebackend.prepare_base`` (``qemu-img convert`` to a staged
  name, rename) + fsync of the base.

Prints median times and last the headline ``convert: ... ratio=R``, R = fleetcache's time over
plain ``qemu-img convert`` (``durable_ratio``: over ``...+sync``). Everything it wrote is
removed at the end.

Run: ``.venv/bin/python bench/convert.py [--size-mib 1024]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import headline, log, median  # noqa: E402

EXTENT = 4 * 1024 * 1024


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024,
                        help="virtual size of the image; half of it is data")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workdir", default="/var/tmp",
                        help="where the image and the conversions are written (one disk)")
    return parser.parse_args()


def make_qcow2(work: Path, size: int) -> Path:
    """A qcow2 whose every other 4 MiB extent is random data, the rest holes."""
    raw, qcow2 = work / "source.raw", work / "source.qcow2"
    with open(raw, "wb") as f:
        for offset in range(0, size, 2 * EXTENT):
            f.seek(offset)
            f.write(os.urandom(min(EXTENT, size - offset)))
        f.truncate(size)
    subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(raw), str(qcow2)],
                   check=True)
    raw.unlink()
    subprocess.run(["sync", str(qcow2)], check=True)
    return qcow2


class Fleetcache:
    """The image cache's post-download steps for a qcow2 that must become a raw base."""

    def __init__(self, work: Path) -> None:
        from oslo_config import cfg

        from fleetcache.common import config
        from fleetcache.compute import imagebackend

        self.conf = cfg.ConfigOpts()
        config.register_all(self.conf)
        self.conf([], project="fleetcache", default_config_files=[])
        self.conf.set_override("images_type", "flat", group="libvirt")
        self.plan = imagebackend.choose(self.conf, "qcow2")
        if not self.plan.convert or self.plan.base_format != "raw":
            raise RuntimeError(f"the flat backend should convert qcow2 to raw: {self.plan}")
        self.base = work / "_base"
        self.base.mkdir()

    def run(self, source: Path) -> Path:
        from fleetcache.compute import imagecache
        from fleetcache.image.format_safety import inspect_image

        download = self.base / ".bench.part-download"
        os.link(source, download)  # the "download": the same bytes, no copy
        final = self.base / "bench"
        inspect_image(str(download), "qcow2", self.conf, image_id="bench")
        imagecache.publish(self.plan, "bench", str(download), str(final))
        return final


def plain(source: Path, dest: Path, sync: bool = False) -> Path:
    subprocess.run(["qemu-img", "convert", "-f", "qcow2", "-O", "raw", str(source), str(dest)],
                   check=True)
    if sync:
        subprocess.run(["sync", str(dest)], check=True)
    return dest


def main() -> int:
    args = parse_args()
    size = args.size_mib * 1024 * 1024
    work = Path(tempfile.mkdtemp(prefix="fcbench-convert-", dir=args.workdir))
    times: dict[str, list[float]] = {"qemu-img convert": [], "...+sync": [], "fleetcache": []}
    try:
        started = time.monotonic()
        source = make_qcow2(work, size)
        log(f"built {source} ({source.stat().st_size} bytes for {size} virtual) in "
            f"{time.monotonic() - started:.1f} s")
        fleetcache = Fleetcache(work)
        runs: dict[str, Callable[[], Path]] = {
            "qemu-img convert": lambda: plain(source, work / "plain.raw"),
            "...+sync": lambda: plain(source, work / "sync.raw", sync=True),
            "fleetcache": lambda: fleetcache.run(source),
        }
        plain(source, work / "warm.raw").unlink()  # warm the source in the page cache
        for rnd in range(args.rounds):
            names = list(runs)[rnd % len(runs):] + list(runs)[:rnd % len(runs)]
            outputs = []
            for name in names:
                subprocess.run(["sync"], check=True)  # no write-back left from the last run
                began = time.monotonic()
                outputs.append(runs[name]())
                times[name].append(time.monotonic() - began)
            sizes = {out.stat().st_size for out in outputs}
            if sizes != {size}:
                raise RuntimeError(f"outputs have sizes {sizes}, expected {size}")
            for out in outputs:
                out.unlink()
            log(f"round {rnd + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {k: median(v) for k, v in times.items()}
    print(f"qcow2 of {size} virtual bytes (half data), {args.rounds} rounds, disk {args.workdir}")
    for name, value in med.items():
        print(f"{name:>18}: median {value:.3f} s ({size / value / 1e6:.0f} MB/s of virtual size)")
    print(headline("convert", med["fleetcache"] / med["qemu-img convert"],
                   size_mib=args.size_mib, qemu_img_s=med["qemu-img convert"],
                   qemu_img_sync_s=med["...+sync"], fleetcache_s=med["fleetcache"],
                   durable_ratio=med["fleetcache"] / med["...+sync"]))
    return 0


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    sys.exit(main())
