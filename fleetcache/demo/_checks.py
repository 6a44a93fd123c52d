"""What the demo checks after pre-caching: the computes' caches and the notifications sent."""

from __future__ import annotations

import collections
import hashlib
import json
import os
import shutil
import subprocess
import threading
import time
from typing import Any

import oslo_messaging as messaging

from fleetcache.common import rpc
from fleetcache.compute.imagecache import PART_MARK, cache_name

PROGRESS = "aggregate.cache_images.progress"


def _sha512(path: str) -> str:
    digest = hashlib.sha512()
    with open(path, "rb") as f:
        while chunk := f.read(1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def _disk_format(path: str) -> str:
    with open(path, "rb") as f:
        return "qcow2" if f.read(4) == b"QFI\xfb" else "raw"


def _same_contents(source: str, source_format: str, cached: str) -> bool:
    """Byte-identical, or (a converted image) the same disk contents per ``qemu-img compare``."""
    cached_format = _disk_format(cached)
    if source_format == cached_format:
        return _sha512(source) == _sha512(cached)
    qemu_img = shutil.which("qemu-img")
    if qemu_img is None:
        return False
    proc = subprocess.run(  # noqa: S603 - our own files, formats given explicitly
        [qemu_img, "compare", "-q", "-f", source_format, "-F", cached_format, source, cached],
        capture_output=True, check=False)
    return proc.returncode == 0


def check_caches(
    source_dir: str, workdir: str, hosts: list[str], image_ids: list[str]
) -> list[str]:
    """Every image in every host's ``_base`` under its sha1 name, with the source's contents
    (byte-identical, or the same disk when the compute converted it to raw), and no partial
    download left. :returns: the problems found."""
    problems = []
    for image_id in image_ids:
        source = os.path.join(source_dir, image_id)
        with open(source + ".json", encoding="utf-8") as f:
            source_format = str(json.load(f).get("disk_format") or "raw")
        for host in hosts:
            base = os.path.join(workdir, "instances", host, "_base")
            path = os.path.join(base, cache_name(image_id))
            if not os.path.isfile(path):
                problems.append(f"{host}: image {image_id} is not in {base}")
            elif not _same_contents(source, source_format, path):
                problems.append(f"{host}: {path} differs from image {image_id}")
            partial = [n for n in os.listdir(base) if PART_MARK in n] if os.path.isdir(base) else []
            if partial:
                problems.append(f"{host}: partial downloads left in {base}: {partial}")
    return problems


class NotificationCounter:
    """Listens to topic ``notifications`` on the in-process transport and counts events."""

    def __init__(self, transports: rpc.Transports) -> None:
        transport = transports.notification()
        self.events: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self.listener = messaging.get_notification_listener(
            transport, [messaging.Target(topic="notifications")], [self]
        )

    def info(self, ctxt: Any, publisher_id: str, event_type: str, payload: Any,
             metadata: Any) -> None:
        with self._lock:
            self.events[event_type] += 1

    def start(self) -> None:
        self.listener.start()

    def stop(self) -> None:
        self.listener.stop()
        self.listener.wait()

    def check(self, progress: int, timeout: float = 10.0) -> list[str]:
        """Wait for ``progress`` progress events; :returns: the problems found."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self.events[PROGRESS] >= progress:
                    break
            time.sleep(0.05)
        with self._lock:
            seen = dict(self.events)
        print("Notifications: " + ", ".join(f"{n} x {e}" for e, n in sorted(seen.items())),
              flush=True)
        if seen.get(PROGRESS, 0) != progress:
            return [f"expected {progress} progress notifications, got {seen.get(PROGRESS, 0)}"]
        return []
