"""``fleetcache demo`` (what ``make demo`` runs): exit status 0 and the per-host table (each
image from the image source once, then from peers), with ``qemu-img`` installed and on a host
without it (a fresh machine)."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest


def path_without_qemu_img(bin_dir: pathlib.Path) -> str:
    """A ``PATH`` of one directory linking every command of this one but ``qemu-img``."""
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            link = bin_dir / name
            if name != "qemu-img" and not link.exists():
                link.symlink_to(os.path.join(directory, name))
    return str(bin_dir)


def run_demo(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = os.path.join(os.path.dirname(sys.executable), "fleetcache")
    return subprocess.run([script, "demo"], capture_output=True, text=True, timeout=300,
                           env=env)


@pytest.mark.parametrize("qemu_img", [True, False], ids=["with-qemu-img", "without-qemu-img"])
def test_demo_precaches_every_image_on_every_compute(
    tmp_path: pathlib.Path, qemu_img: bool
) -> None:
    assert shutil.which("qemu-img"), "qemu-img missing: run tools/install-debian-deps.sh"
    env = dict(os.environ)
    if not qemu_img:
        env["PATH"] = path_without_qemu_img(tmp_path / "bin")
        assert shutil.which("qemu-img", path=env["PATH"]) is None
    proc = run_demo(env)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "Traceback" not in proc.stderr
    header = re.search(r"^\| Host +\| (.+) \| Downloaded \|$", out, re.M)
    assert header is not None, out
    images = [c.strip() for c in header.group(1).split("|")]
    if qemu_img:
        assert images == ["demo-qcow2", "demo-raw"]
        assert "qemu-img not found" not in out
    else:
        assert images == ["demo-raw"]
        assert re.search(r"^qemu-img not found: pre-caching only the raw image, on computes "
                         r"with \[libvirt\] images_type = flat .*install qemu-utils", out, re.M)
    rows = re.findall(r"^\| (compute\d) +\| (.+) \| +[\d.]+ \w+ \|$", out, re.M)
    assert sorted(h for h, _ in rows) == ["compute1", "compute2", "compute3"]
    # Peer distribution: each image from the image source once, then from the computes.
    columns = list(zip(*([c.strip() for c in cells.split("|")] for _, cells in rows),
                       strict=True))
    assert len(columns) == len(images)
    for column in columns:
        assert sorted(column)[0] == "cached", column  # the one that took it from the source
        assert all(re.fullmatch(r"cached \N{LEFTWARDS ARROW} compute\d", cell)
                   for cell in sorted(column)[1:]), column
    origin = "2 copies" if qemu_img else "1 copy"
    assert re.search(rf"^Origin {origin} \([\d.]+ MiB\), peers {2 * len(images)} copies "
                     r"\([\d.]+ MiB\), offload 66.7 %", out, re.M), out
    assert re.search(rf"done in [\d.]+ s, 3 hosts: {3 * len(images)} cached, 0 existing, "
                     r"0 error, 0 unsupported, 0 skipped", out)
    assert re.search(rf"Second request .*: 0 cached, {3 * len(images)} existing", out)
    assert "2 x aggregate.cache_images.start" in out
    # One server per image, active from the cache, with where and why.
    booted = re.findall(r"^  vm-(demo-\w+) -> compute\d: (\w+) disk \(\w+\), image from the "
                        r"cache, no download; (\w+) hosts compute1, compute2, compute3; "
                        r"cached on compute1, compute2, compute3", out, re.M)
    assert [name for name, _, _ in booted] == images, out
    assert all(backend == ("qcow2" if qemu_img else "flat") for _, backend, _ in booted), booted
    assert "Demo OK: every image is in every compute's _base" in out
    assert "3/3 hosts  done" in proc.stderr  # the progress bar
