"""``fleetcache demo``: the embedded default, everything in one process.

A conductor, the API and ``hosts`` compute agents run in this process on oslo.messaging's
in-process ``fake://`` transport, with SQLite and a ``local`` image source in a temporary
directory, and a real Placement (openstack-placement's WSGI application on SQLite, served on
127.0.0.1: :mod:`fleetcache.demo.placement_embedded`) that the conductor keeps the computes'
resource providers in. The demo generates two small images (a real qcow2 made with
``qemu-img`` when it is installed, and a raw one), registers the computes, creates an aggregate
over them through the REST API (served on 127.0.0.1, a free port), pre-caches the images on it
through the same code path as production (``POST /os-aggregates/{id}/images``, then the job
resource) with peer distribution on (each compute's image server on 127.0.0.1, a free port:
one copy of each image from the source, the rest from peers), prints the per-host, per-image
table and where each host's copy came from, and checks every compute's ``_base``. A
second request shows the images reported ``existing``; then one server per image is booted
through ``POST /servers`` (the scheduler on Placement, the disk from the cache) and the demo
says where each went and why (:mod:`fleetcache.demo._boot`), and the computes' resource
providers are printed (inventory, ``COMPUTE_IMAGE_TYPE_*`` traits, the aggregate mirrored from
``add_host``). Exit status 0 when every image reached every host, every server is active and
every provider is in the aggregate.

Without ``qemu-img`` (a fresh machine) the demo says so in one line and runs on what such a
host can honestly do: only the raw image, on computes with ``[libvirt] images_type = flat``
(a qcow2 overlay needs qemu-img) that exclude every image type with a header (format
inspection of those needs qemu-img; raw content needs only the format inspector).

The conductor and the computes are the services the daemons run, built by their entry points'
``build_service`` (:class:`Builders`, which :mod:`fleetcache.cmd.client` hands in: this room
sits below ``cmd/``). Each service builds its own :class:`~fleetcache.common.rpc.Transports`
from its own configuration, as the daemons do; ``fake://`` keeps its queues in one class-level
table, so they all meet there.

NOTE: ``fake://`` costs about 50 ms per RPC hop (measured: 50 ms median over 200 calls; its
driver polls with ``time.sleep(0.05)``): fine here, and it keeps the demo on the very RPC code
the daemons run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from oslo_config import cfg

from fleetcache.api import wsgi
from fleetcache.client import render
from fleetcache.client.api_client import ApiClient
from fleetcache.common import binaries, config, rpc
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import services as db_services
from fleetcache.common.db.migration import db_sync
from fleetcache.common.db.session import Database
from fleetcache.common.disk_formats import INSPECTABLE_FORMATS, RAW_CONTENT_FORMATS
from fleetcache.common.service import Service
from fleetcache.conductor.manager import ConductorState
from fleetcache.conductor.placement import PlacementClient, provider_uuid
from fleetcache.demo import _boot, _local_wsgi, placement_embedded
from fleetcache.demo._checks import NotificationCounter, check_caches
from fleetcache.image import local

LOG = logging.getLogger(__name__)

TRANSPORT_URL = "fake://"
CONTROLLER = "demo-controller"
#: oslo.messaging's option groups a demo service reads: ``[DEFAULT]`` (``transport_url``,
#: timeouts) as every daemon registers them, and the notifier's.
MESSAGING_GROUPS = (None, "oslo_messaging_notifications")
#: One copy per site, the conductor's and the computes' settings: each image comes once from
#: the image source, then the computes take it from each other, each serving its cache on
#: 127.0.0.1, a free port.
PEERS = {"image_cache.peer_distribution": True, "my_ip": "127.0.0.1",
         "image_cache.peer_listen_port": 0}


class Builders(NamedTuple):
    """How the daemons' entry points assemble a service, for the demo to run the same ones:
    :func:`fleetcache.cmd.conductor.build_service` and
    :func:`fleetcache.cmd.compute.build_service`."""

    conductor: Callable[[cfg.ConfigOpts, Database, rpc.Transports],
                        tuple[Service, ConductorState]]
    compute: Callable[[cfg.ConfigOpts, rpc.Transports], Service]


def make_conf(workdir: str, host: str, **overrides: Any) -> cfg.ConfigOpts:
    """A private configuration reading no file: the demo's settings only."""
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    rpc.register_opts(conf, MESSAGING_GROUPS)
    conf([], project="fleetcache", default_config_files=[], default_config_dirs=[])
    settings: dict[tuple[str | None, str], Any] = {
        (None, "host"): host,
        (None, "state_path"): workdir,
        (None, "transport_url"): TRANSPORT_URL,
        ("image_source", "backend"): "local",
        ("api", "auth_strategy"): "noauth",
        # No Keystone here, so no unified limits: the demo's projects have no quota.
        ("quota", "driver"): "noop",
    }
    for key, value in overrides.items():
        prefix, _, name = key.rpartition(".")
        settings[(prefix or None, name)] = value
    for (group, name), value in settings.items():
        conf.set_override(name, value, group=group)
    return conf


def compute_overrides(qemu_img: str | None) -> dict[str, Any]:
    """The computes' settings besides :data:`PEERS`: with qemu-img, bases kept in their
    image's format; without it, a raw-only compute.

    A base converted to raw (``force_raw_images``, Nova's default) is not the image's bytes,
    so it is never served to peers: its host serves the image only while it downloads it
    (cut-through), and the demo's small images download in milliseconds. With converted
    bases a receiver often asks its peer after that peer's download has ended, is refused,
    and takes the qcow2 image from the image service: in 5 runs of 16, one or two more
    copies from the image service (docs/peer-distribution.md, "Limits today").
    """
    if qemu_img:
        return {"force_raw_images": False}
    with_header = [f for f in INSPECTABLE_FORMATS if f not in RAW_CONTENT_FORMATS]
    return {"libvirt.images_type": "flat", "compute.image_type_exclude_list": with_header}


def make_images(workdir: str, directory: str,
                qemu_img: str | None) -> list[tuple[str, str, str]]:
    """Two small images in the local source (only the raw one without ``qemu_img``):
    ``[(image_id, name, disk_format)]``."""
    images = []
    if qemu_img:
        path = os.path.join(workdir, "cirros-like.qcow2")
        subprocess.run([qemu_img, "create", "-q", "-f", "qcow2", path, "64M"],  # noqa: S603
                       check=True)
        meta = local.add_image(directory, path, name="demo-qcow2", disk_format="qcow2")
        images.append((meta.id, "demo-qcow2", "qcow2"))
    raw = os.path.join(workdir, "demo.raw")
    with open(raw, "wb") as f:
        for n in range(4):  # 4 MiB, not all zeros, so that the bytes matter
            f.write(os.urandom(64 * 1024) * 16 if n % 2 else bytes(1024 * 1024))
    meta = local.add_image(directory, raw, name="demo-raw", disk_format="raw")
    images.append((meta.id, "demo-raw", "raw"))
    return images


@contextlib.contextmanager
def serve_api(conf: cfg.ConfigOpts) -> Iterator[str]:
    """Serve the real API application on 127.0.0.1, a free port; yields its endpoint."""
    with _local_wsgi.serve(wsgi.init_application(conf), "demo-api") as url:
        yield f"{url}/v2.1"


def wait_in_placement(db: Database, hosts: list[str], timeout: float = 30.0) -> None:
    """Wait until the conductor has written every compute's resource provider."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        services = db_services.service_list(db, binary=binaries.COMPUTE, hosts=hosts)
        if len(services) == len(hosts) and all(s["placement_synced_at"] for s in services):
            return
        time.sleep(0.1)
    raise RuntimeError(f"computes did not reach Placement within {timeout:.0f} s")


def placement_summary(conf: cfg.ConfigOpts, hosts: list[str]) -> list[str]:
    """One line per compute: its resource provider's inventory, traits and aggregates."""
    client = PlacementClient.from_conf(conf)
    assert client is not None
    lines = []
    for host in hosts:
        rp = provider_uuid(host)
        _, inventory = client.get_inventories(rp)
        _, traits = client.get_traits(rp)
        _, aggregates = client.get_aggregates(rp)
        sizes = ", ".join(f"{rc} {inv['total']}" for rc, inv in sorted(inventory.items()))
        lines.append(f"  {host} ({rp}): {sizes}; traits {', '.join(sorted(traits))}; "
                     f"aggregates {', '.join(sorted(aggregates)) or '-'}")
    return lines


def wait_registered(db: Database, hosts: list[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        known = {s["host"] for s in db_services.service_list(db, binary=binaries.COMPUTE)}
        if set(hosts) <= known:
            return
        time.sleep(0.1)
    raise RuntimeError(f"computes did not register within {timeout:.0f} s")


def wait_aggregate_mirrored(
    conf: cfg.ConfigOpts, hosts: list[str], aggregate_uuid: str, timeout: float = 10.0
) -> list[str]:
    """Problems left once every host's provider is in ``aggregate_uuid`` (the conductor
    mirrors ``add_host`` from a cast) or ``timeout`` passed."""
    client = PlacementClient.from_conf(conf)
    assert client is not None
    deadline = time.monotonic() + timeout
    while True:
        missing = [h for h in hosts
                   if aggregate_uuid not in client.get_aggregates(provider_uuid(h))[1]]
        if not missing or time.monotonic() > deadline:
            return [f"{h}: aggregate {aggregate_uuid} not mirrored into Placement"
                    for h in missing]
        time.sleep(0.1)


def _stop_all(services: list[Service]) -> None:
    threads = [threading.Thread(target=s.stop, daemon=True) for s in services]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)


def _say(message: str) -> None:
    print(message, flush=True)


def run(builders: Builders, hosts: int = 3, keep: bool = False, verbose: bool = False) -> int:
    """Run the demo; :returns: the exit status.

    :param builders: the daemons' ``build_service`` functions, for the conductor and the
        computes.
    """
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    workdir = tempfile.mkdtemp(prefix="fleetcache-demo-")
    services: list[Service] = []
    cleanups = contextlib.ExitStack()
    try:
        return _run(builders, workdir, hosts, services, cleanups)
    finally:
        _stop_all(services)
        cleanups.close()
        if keep:
            _say(f"Demo files kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _run(builders: Builders, workdir: str, n_hosts: int, services: list[Service],
         cleanups: contextlib.ExitStack) -> int:
    """The demo itself. It appends the services it starts to ``services`` and what shuts
    their pools and transports to ``cleanups``; :func:`run` stops the services, then closes
    ``cleanups`` (last registered first)."""
    conf = make_conf(workdir, CONTROLLER, **{
        "image_cache.precache_concurrency": n_hosts,
        "oslo_messaging_notifications.driver": ["messaging"],
        **PEERS,
    })
    placement_endpoint = cleanups.enter_context(placement_embedded.serve(workdir))
    placement_embedded.point_at(conf, placement_endpoint)
    db = Database.from_conf(conf)
    db_sync(db)
    db_cells.cell_create(db, "cell1", TRANSPORT_URL)
    qemu_img = shutil.which("qemu-img")
    if not qemu_img:
        _say("qemu-img not found: pre-caching only the raw image, on computes with [libvirt] "
             "images_type = flat that refuse qcow2 and other formats (install qemu-utils, "
             "e.g. tools/install-debian-deps.sh, for the qcow2 image and qcow2 overlays)")
    images = make_images(workdir, conf.image_source.local_directory, qemu_img)
    names = {image_id: name for image_id, name, _ in images}
    _say(f"Working in {workdir}; images: " + ", ".join(f"{n} ({i})" for i, n, _ in images))

    conductor_transports = rpc.Transports(conf)
    cleanups.callback(conductor_transports.cleanup)
    notifications = NotificationCounter(conductor_transports)
    notifications.start()
    conductor, state = builders.conductor(conf, db, conductor_transports)
    cleanups.callback(state.shutdown)
    conductor.start()
    services.append(conductor)
    hosts = [f"compute{n}" for n in range(1, n_hosts + 1)]
    for host in hosts:
        cconf = make_conf(workdir, host, instances_path=os.path.join(workdir, "instances", host),
                          **PEERS, **compute_overrides(qemu_img))
        compute_transports = rpc.Transports(cconf)
        cleanups.callback(compute_transports.cleanup)
        compute = builders.compute(cconf, compute_transports)
        compute.start()
        services.append(compute)
    wait_registered(db, hosts)
    wait_in_placement(db, hosts)
    _say(f"Conductor and {len(hosts)} computes running in cell1 on {TRANSPORT_URL}; "
         f"Placement (in-process, SQLite) on {placement_endpoint}")

    with serve_api(conf) as endpoint:
        api = ApiClient(endpoint)
        aggregate = api.create_aggregate("demo-aggregate")
        for host in hosts:
            api.add_host(aggregate["id"], host)
        _say(f"API on {endpoint}; aggregate {aggregate['name']} ({aggregate['id']}, "
             f"{aggregate['uuid']}) holds {', '.join(hosts)}")
        image_ids = [i for i, _, _ in images]
        bar = render.ProgressBar(sys.stderr)
        try:
            job = api.wait_job(api.cache_images(aggregate["id"], image_ids),
                               on_update=bar.update, interval=0.2, timeout=300)
        finally:
            bar.close()
        _say(render.job_table(job, names))
        _say(render.job_summary(job))
        again = api.wait_job(api.cache_images(aggregate["id"], image_ids), timeout=300)
        _say("Second request (already cached, leases renewed): " + render.job_summary(again))
        _say("One server per image (openstack server create --network none), where each "
             "went and why:")
        lines, boot_problems = _boot.boot_one_per_image(api, db, conf, hosts, images)
        for line in lines:
            _say(line)
    problems = boot_problems + check_caches(conf.image_source.local_directory, workdir, hosts,
                                            image_ids)
    problems += wait_aggregate_mirrored(conf, hosts, aggregate["uuid"])
    _say("Resource providers in Placement:")
    for line in placement_summary(conf, hosts):
        _say(line)
    problems += notifications.check(len(hosts) * 2)
    notifications.stop()
    ok = not problems and not render.job_failed(job) and not render.job_failed(again)
    ok = ok and job["counts"]["cached"] == len(hosts) * len(image_ids)
    ok = ok and again["counts"]["existing"] == len(hosts) * len(image_ids)
    for problem in problems:
        _say(f"PROBLEM: {problem}")
    _say("Demo OK: every image is in every compute's _base" if ok else "Demo FAILED")
    db.dispose()
    return 0 if ok else 1
