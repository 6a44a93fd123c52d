"""The computes of ``bench/p2p.py``: each a process with the real data plane, and the
driver's handle on it.

:func:`host_main` runs in the compute's process (in its namespace with Tier A): a real
``ComputeManager`` on a real ``DiskDriver``, a real ``PeerServer`` and ``ServeGrants``, the
real ``GlanceImageSource`` pointed at the origin, and :class:`p2p_faults.HostFaults` for the
fault runs. :class:`Host` is the driver's side of its two pipes (``cache_images`` one at a
time on one, everything else on the other), and :class:`BenchServeClient` hands the
planner's ``serve_images`` to a host as the compute RPC API would.
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection
import os
import threading
import time
from typing import Any

import p2p_faults
from p2p_links import Links, enter_netns


class _UploadMetrics:
    """The image server's upload counters the bench needs (``PeerMetrics``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.max_in_flight = 0
        self.sent = 0
        self.requests: dict[int, int] = {}
        self.denied: dict[str, int] = {}

    def record_peer_request(self, code: int) -> None:
        with self.lock:
            self.requests[code] = self.requests.get(code, 0) + 1

    def record_peer_denied(self, reason: str) -> None:
        with self.lock:
            self.denied[reason] = self.denied.get(reason, 0) + 1

    def record_peer_upload(self, sent: int, in_flight: int) -> None:
        with self.lock:
            self.sent += sent
            self.max_in_flight = max(self.max_in_flight, in_flight)

    def take(self) -> dict[str, Any]:
        """The counters since the last call (then reset)."""
        with self.lock:
            out = {"max_in_flight": self.max_in_flight, "sent": self.sent,
                   "requests": dict(self.requests), "denied": dict(self.denied)}
            self.max_in_flight = self.sent = 0
            self.requests.clear()
            self.denied.clear()
        return out


def host_main(netns: str | None, calls: multiprocessing.connection.Connection,
              control: multiprocessing.connection.Connection, spec: dict[str, Any]) -> None:
    """One compute: a ComputeManager on a DiskDriver, with its image server. ``calls``
    carries ``cache_images`` (one at a time), ``control`` the rest (``serve_images``, stats,
    drop), each served by its own thread."""
    enter_netns(netns)
    import logging

    from oslo_config import cfg

    from fleetcache.common import config, context
    from fleetcache.compute.imagecache.layout import cache_name
    from fleetcache.compute.manager import ComputeManager
    from fleetcache.compute.peers import PeerServer, ServeGrants
    from fleetcache.compute.virt.disk import DiskDriver
    from fleetcache.image.glance import GlanceImageSource

    logging.basicConfig(level=logging.WARNING, format=f"{spec['host']}: %(message)s")
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([], project="fleetcache", default_config_files=[])
    conf.set_override("host", spec["host"])
    conf.set_override("my_ip", spec["address"])
    conf.set_override("instances_path", spec["instances_path"])
    conf.set_override("backend", "glance", group="image_source")
    conf.set_override("api_servers", [spec["origin_url"]], group="glance")
    opts = {"peer_distribution": True, "peer_listen_address": spec["address"],
            "peer_listen_port": spec["port"], "peer_max_uploads": spec["max_uploads"],
            "max_upload_bytes_per_second": spec["upload_cap"],
            "max_download_bytes_per_second": spec["download_cap"],
            "peer_stall_timeout": spec["stall_timeout"]}
    for name, value in opts.items():
        conf.set_override(name, value, group="image_cache")
    origin = GlanceImageSource(conf)
    driver = DiskDriver(conf, origin)
    driver.init_host(spec["host"])
    grants = ServeGrants()
    metrics = _UploadMetrics()
    manager = ComputeManager(conf, driver, grants=grants)
    server = PeerServer(conf, driver.image_cache, grants, metrics)
    server.start()
    faults = p2p_faults.HostFaults(
        server, lambda: PeerServer(conf, driver.image_cache, grants, metrics),
        driver.image_cache, origin)
    ctxt = context.get_admin_context()
    cache = driver.image_cache

    def serve_calls() -> None:
        while True:
            try:
                image_id, peers, report_refused, hand_back = calls.recv()
            except EOFError:
                return
            started = time.time()
            result = manager.cache_images(ctxt, [image_id], peers={image_id: peers},
                                          origin_after_refused_peers=not report_refused,
                                          origin_after_failed_peers=not hand_back
                                          )[image_id]
            calls.send((dict(result), started, time.time()))

    threading.Thread(target=serve_calls, daemon=True).start()
    control.send(server.url)
    while True:
        try:
            cmd, args = control.recv()
        except EOFError:
            break
        if cmd == "serve":
            try:
                control.send(("ok", manager.serve_images(ctxt, *args)))
            except Exception as exc:  # noqa: BLE001 - handed to the planner as the RPC would
                control.send(("error", f"{type(exc).__name__}: {exc}"))
        elif cmd == "stats":
            control.send(metrics.take())
        elif cmd == "drop":  # the point's image, so that the next point starts empty
            name = cache_name(args)
            with cache.lock(args):
                for path in (cache.path_for(args), os.path.join(cache.index.directory, name),
                             os.path.join(cache.pins.directory, name)):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path)
            control.send(None)
        elif cmd.startswith("fault_"):
            control.send(faults.command(cmd, args))
        else:
            break
    faults.server.stop()


class Host:
    """The driver's handle on one compute process."""

    def __init__(self, ctx: Any, index: int, links: Links, spec: dict[str, Any]) -> None:
        self.name = spec["host"]
        self.index = index
        self.group = links.group_of(index)
        self.address = spec["address"]
        self._calls, calls = ctx.Pipe()
        self._control, control = ctx.Pipe()
        self._lock = threading.Lock()
        self.proc = ctx.Process(target=host_main, name=self.name, daemon=True,
                                args=(links.host_netns(index), calls, control, spec))
        self.proc.start()
        self.url = ""

    def ready(self, timeout: float = 120) -> None:
        if not self._control.poll(timeout):
            raise RuntimeError(f"{self.name} did not start within {timeout} s")
        self.url = self._control.recv()

    def cache_images(self, image_id: str, peers: list[Any], report_refused: bool = False,
                     hand_back: bool = False) -> tuple[dict[str, Any], float, float]:
        self._calls.send((image_id, peers, report_refused and bool(peers),
                          hand_back and bool(peers)))
        result: tuple[dict[str, Any], float, float] = self._calls.recv()
        return result

    def control(self, cmd: str, args: Any = None) -> Any:
        with self._lock:
            self._control.send((cmd, args))
            return self._control.recv()

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._control.send(("stop", None))
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)


class BenchServeClient:
    """The planner's ``ServeClient``: ``serve_images`` to a host's process (as the compute
    RPC API would, a failure raised to the planner)."""

    def __init__(self, hosts: dict[str, Host]) -> None:
        self.hosts = hosts

    def serve_images(self, ctxt: Any, host: str, job_uuid: str, key: str,
                     image_ids: list[str], until: float) -> list[str]:
        status, value = self.hosts[host].control("serve", (job_uuid, key, image_ids, until))
        if status != "ok":
            raise RuntimeError(value)
        served: list[str] = value
        return served
