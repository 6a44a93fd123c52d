#!/usr/bin/env python3
"""qcow2 -> raw conversion of a cached image: fleetcache's path beside plain ``qemu-img convert``.

Builds one qcow2 of ``--size-mib`` virtual MiB, half of it random data in 4 MiB extents and
half holes (a typical cloud image is mostly sparse), then runs, on that same file and the
same disk, ``--rounds`` rounds of each of these, one after the other, the order rotated each
round, a ``sync`` before each run so that no earlier write-back weighs on it:

* ``qemu-img convert``: ``qemu-img convert -f qcow2 -O raw SRC DST``, plain. qemu-img's
  default cache mode for convert is ``unsafe``: nothing is flushed, the data is still only in
  the page cache when it exits. Not durable: the issue's denominator.
* ``convert+sync``: the same, then ``sync DST`` (fsync): the honest durable baseline.
* ``fleetcache``: what the image cache does with a downloaded qcow2 that a ``flat`` backend
  needs as raw, in this process: ``inspect_image`` (format inspector on the headers, then
  ``qemu-img info`` and ``qemu-img check`` under ``prlimit``), ``imagecache.publish``
  (``imagebackend.prepare_base``: ``qemu-img convert -t none -W`` to a staged name, fsync,
  rename) and the fsync of ``_base`` that makes the rename durable. Its steps are timed too.

Twice: ``warm``, the source in the page cache (as in the real pipeline, which converts the
file it has just written), and ``cold``, the source's pages dropped before each run with
``posix_fadvise(DONTNEED)`` (that file only: the machine is shared). ``--flags`` adds rows for
plain qemu-img with other output cache modes, to show which durable mode is fastest.

Prints median and min per row, fleetcache's steps, the ratios, and last the headline
``convert: ... ratio=R`` with R = warm fleetcache / warm plain ``qemu-img convert`` (as the
issue asks); ``durable_ratio`` is over ``convert+sync``, ``cold_*`` the same for cold runs.
Everything it wrote is removed at the end.

Run: ``.venv/bin/python bench/convert.py [--size-mib 1024] [--rounds 7] [--flags]``
"""

from __future__ import annotations

import argparse
import functools
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

from _benchlib import headline, loadavg, log, median, parse_with_smoke  # noqa: E402

EXTENT = 4 * 1024 * 1024
PLAIN, SYNCED, FLEETCACHE = "qemu-img convert", "convert+sync", "fleetcache"
#: ``--flags`` rows: extra qemu-img convert options, and whether an fsync follows.
FLAG_ROWS = {"-t writeback": (["-t", "writeback"], False),
             "-t none": (["-t", "none"], False),
             "-t none -W": (["-t", "none", "-W"], False),
             "-W, then sync": (["-W"], True)}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024,
                        help="virtual size of the image; half of it is data")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--workdir", default="/var/tmp",
                        help="where the image and the conversions are written (one disk)")
    parser.add_argument("--cache", choices=["warm", "cold", "both"], default="both")
    parser.add_argument("--flags", action="store_true",
                        help="also time plain qemu-img with other output cache modes")
    return parse_with_smoke(parser, {"size_mib": 16, "rounds": 1})


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


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_from_cache(path: Path) -> None:
    """Evict ``path``'s (clean) pages from the page cache, and no other file's."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm_up(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(8 * 1024 * 1024):
            pass


class Fleetcache:
    """The image cache's post-download steps for a qcow2 that must become a raw base."""

    STEPS = ("inspect", "convert", "dir fsync")

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
        self.steps: dict[str, list[float]] = {step: [] for step in self.STEPS}

    def run(self, source: Path) -> Path:
        from fleetcache.compute.imagecache import fsync_dir, publish
        from fleetcache.image.format_safety import inspect_image

        download = self.base / ".bench.part-download"
        os.link(source, download)  # the "download": the same bytes, no copy
        final = self.base / "bench"
        marks = [time.monotonic()]
        inspect_image(str(download), "qcow2", self.conf, image_id="bench")
        marks.append(time.monotonic())
        publish(self.plan, "bench", str(download), str(final))
        marks.append(time.monotonic())
        fsync_dir(str(self.base))
        marks.append(time.monotonic())
        for step, began, ended in zip(self.STEPS, marks[:-1], marks[1:], strict=True):
            self.steps[step].append(ended - began)
        return final


def plain(source: Path, dest: Path, flags: list[str] | None = None, sync: bool = False) -> Path:
    subprocess.run(["qemu-img", "convert", *(flags or []), "-f", "qcow2", "-O", "raw",
                    str(source), str(dest)], check=True)
    if sync:
        fsync(dest)
    return dest


def run_rounds(runs: dict[str, Callable[[], Path]], source: Path, size: int, rounds: int,
               cold: bool) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in runs}
    label = "cold" if cold else "warm"
    warm_up(source)
    for rnd in range(rounds):
        names = list(runs)[rnd % len(runs):] + list(runs)[:rnd % len(runs)]
        for name in names:
            os.sync()  # no write-back left from the last run
            if cold:
                drop_from_cache(source)
            began = time.monotonic()
            out = runs[name]()
            times[name].append(time.monotonic() - began)
            if out.stat().st_size != size:
                raise RuntimeError(f"{name} wrote {out.stat().st_size} bytes, not {size}")
            out.unlink()
        log(f"{label} round {rnd + 1}: " +
            ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items()))
    return times


def report(label: str, times: dict[str, list[float]], steps: dict[str, list[float]],
           size: int) -> dict[str, float]:
    med = {k: median(v) for k, v in times.items()}
    print(f"-- {label} source --")
    for name, values in times.items():
        print(f"{name:>18}: median {med[name]:.3f} s, min {min(values):.3f} s "
              f"({size / med[name] / 1e6:.0f} MB/s of virtual size)")
    print(f"{'fleetcache steps':>18}: " +
          ", ".join(f"{k} {median(v) * 1000:.1f} ms" for k, v in steps.items()))
    print(f"{'ratios':>18}: fleetcache / qemu-img convert {med[FLEETCACHE] / med[PLAIN]:.3f}, "
          f"fleetcache / convert+sync {med[FLEETCACHE] / med[SYNCED]:.3f}")
    return med


def main() -> int:
    args = parse_args()
    size = args.size_mib * 1024 * 1024
    work = Path(tempfile.mkdtemp(prefix="fcbench-convert-", dir=args.workdir))
    modes = ["warm", "cold"] if args.cache == "both" else [args.cache]
    results: dict[str, dict[str, float]] = {}
    load_before = loadavg()
    try:
        started = time.monotonic()
        source = make_qcow2(work, size)
        log(f"built {source} ({source.stat().st_size} bytes for {size} virtual) in "
            f"{time.monotonic() - started:.1f} s")
        fleetcache = Fleetcache(work)
        runs: dict[str, Callable[[], Path]] = {
            PLAIN: lambda: plain(source, work / "plain.raw"),
            SYNCED: lambda: plain(source, work / "sync.raw", sync=True),
            FLEETCACHE: lambda: fleetcache.run(source),
        }
        if args.flags:
            for n, (name, (flags, sync)) in enumerate(FLAG_ROWS.items()):
                runs[name] = functools.partial(plain, source, work / f"flags{n}.raw", flags, sync)
        print(f"qcow2 of {size} virtual bytes ({source.stat().st_size} in the file, half "
              f"data), {args.rounds} rounds, disk {args.workdir}")
        for mode in modes:
            for steps in fleetcache.steps.values():
                steps.clear()
            times = run_rounds(runs, source, size, args.rounds, cold=mode == "cold")
            results[mode] = report(mode, times, fleetcache.steps, size)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average {load_before} before, {loadavg()} after")
    values: dict[str, object] = {"size_mib": args.size_mib, "rounds": args.rounds}
    for mode, med in results.items():
        prefix = "" if mode == modes[0] else f"{mode}_"
        values.update({f"{prefix}qemu_img_s": med[PLAIN], f"{prefix}qemu_img_sync_s": med[SYNCED],
                       f"{prefix}fleetcache_s": med[FLEETCACHE],
                       f"{prefix}durable_ratio": med[FLEETCACHE] / med[SYNCED]})
    first = results[modes[0]]
    print(headline("convert", first[FLEETCACHE] / first[PLAIN], cache=modes[0], **values))
    return 0


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    sys.exit(main())
