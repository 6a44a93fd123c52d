"""One core's hash of an image's algorithm, the bound of every verified download
(``bench/download.py``): alone, and beside a receive of the image on the other CPUs.

A hash is sequential, so a download that verifies its image runs at best at one core's hash.
:func:`hash_ceiling` measures it with the machine otherwise idle, as the download
benchmark's limit does. :func:`hash_beside_receive` measures the same hash while ``curl``
receives the image on the other CPUs, as any verified download must receive it while it
hashes. On a 2-core VM one core's sha512 ran 4-5 % slower with a busy loop or a memory copy
on the other core (medians of 15 alternated rounds), and at 0.65-1.14 of its speed just
before and after while ``curl`` received beside it (docs/performance.md, "Download from
Glance"). So it is what a download whose pipeline cost nothing at all would reach in that
round: informative, beside the target.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

from _glance import CHUNK


def hash_ceiling(size: int, algo: str) -> tuple[float, float]:
    """MB/s and CPU-s of hashlib's ``algo`` on one core over ``size`` bytes in memory
    (with verification on, no download can beat it, a hash being sequential)."""
    block, digest = os.urandom(CHUNK), hashlib.new(algo)
    cpu0, started = time.thread_time(), time.monotonic()
    for _ in range(0, size, CHUNK):
        digest.update(block)
    return size / (time.monotonic() - started) / 1e6, time.thread_time() - cpu0


def hash_beside_receive(url: str, header: Path, algo: str) -> float:
    """MB/s of hashlib's ``algo`` on the calling thread's highest CPU, in memory, for as long as
    ``curl -o /dev/null`` of ``url`` (headers from the file ``header``) runs on its other CPUs.

    Only the hash and curl are placed, as a fleetcache download places its hash and receive
    threads (``fleetcache.image.verify.HashCpus``); the sender (Glance, on this host) and the
    kernel's loopback work run where the kernel puts them, as during a fetch. With one CPU,
    everything shares it. The clock starts once curl is started (its connection and request
    are inside) and stops after the block during which it ended: a few milliseconds each,
    against a second or more for 1 GiB. The hash goes over one block again and again, already
    in the hashing core's cache, where a download's bytes were just written by another core:
    0.943-0.981 of this speed (docs/performance.md, "Download from Glance"), a cost this
    figure leaves out.

    :raises subprocess.CalledProcessError: curl failed.
    """
    allowed = os.sched_getaffinity(0)
    mine = max(allowed)
    others = allowed - {mine} or allowed
    block, digest, hashed = os.urandom(CHUNK), hashlib.new(algo), 0
    curl: subprocess.Popen[bytes] | None = None
    try:
        os.sched_setaffinity(0, others)  # curl inherits the CPUs it is started on
        curl = subprocess.Popen(["curl", "-sSf", "-H", f"@{header}", "-o", "/dev/null", url])
        os.sched_setaffinity(0, {mine})
        started = time.monotonic()
        while True:  # at least one block, however quickly a tiny image arrives
            digest.update(block)
            hashed += CHUNK
            if curl.poll() is not None:
                break
        elapsed = time.monotonic() - started
    finally:
        os.sched_setaffinity(0, allowed)
        if curl is not None and curl.poll() is None:  # interrupted: no curl left behind
            curl.kill()
            curl.wait()
    if curl.returncode:
        raise subprocess.CalledProcessError(curl.returncode, curl.args)
    return hashed / elapsed / 1e6
