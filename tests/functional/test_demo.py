"""``fleetcache demo`` (what ``make demo`` runs): exit status 0 and the per-host table."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys


def test_demo_precaches_every_image_on_every_compute():
    script = os.path.join(os.path.dirname(sys.executable), "fleetcache")
    proc = subprocess.run([script, "demo"], capture_output=True, text=True, timeout=300)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    header = re.search(r"^\| Host +\| (.+) \| Downloaded \|$", out, re.M)
    assert header is not None, out
    images = [c.strip() for c in header.group(1).split("|")]
    assert "demo-raw" in images
    if shutil.which("qemu-img"):
        assert "demo-qcow2" in images
    rows = re.findall(r"^\| (compute\d) +\| (.+) \| +[\d.]+ \w+ \|$", out, re.M)
    assert sorted(h for h, _ in rows) == ["compute1", "compute2", "compute3"]
    for _, cells in rows:
        assert [c.strip() for c in cells.split("|")] == ["cached"] * len(images)
    assert re.search(rf"done in [\d.]+ s, 3 hosts: {3 * len(images)} cached, 0 existing, "
                     r"0 error, 0 unsupported, 0 skipped", out)
    assert re.search(rf"Second request .*: 0 cached, {3 * len(images)} existing", out)
    assert "2 x aggregate.cache_images.start" in out
    assert "Demo OK: every image is in every compute's _base" in out
    assert "3/3 hosts  done" in proc.stderr  # the progress bar
