"""The demo's last act: boot one server per image through the REST API and say where each
went and why (the hosts whose Placement provider has the image's format trait, the hosts whose
cache holds the image, the disk backend the chosen host's ``images_type_mapping`` picked, and
whether the image had to be downloaded)."""

from __future__ import annotations

import time
from typing import Any

from oslo_config import cfg

from fleetcache.client.api_client import ApiClient
from fleetcache.common.db import host_images
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db.session import Database
from fleetcache.conductor.placement import PlacementClient, provider_uuid

FLAVOR = {"name": "demo-small", "id": "demo-small", "ram": 64, "vcpus": 1, "disk": 1}


def _wait_settled(api: ApiClient, server_id: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        server: dict[str, Any] = api.get(f"/servers/{server_id}")["server"]
        if server["status"] not in ("BUILD", "REBUILD") or time.monotonic() > deadline:
            return server
        time.sleep(0.2)


def _format_hosts(conf: cfg.ConfigOpts, hosts: list[str], disk_format: str) -> list[str]:
    client = PlacementClient.from_conf(conf)
    assert client is not None
    trait = f"COMPUTE_IMAGE_TYPE_{disk_format.upper()}"
    return [h for h in hosts if trait in client.get_traits(provider_uuid(h))[1]]


def boot_one_per_image(
    api: ApiClient, db: Database, conf: cfg.ConfigOpts, hosts: list[str],
    images: list[tuple[str, str, str]], timeout: float = 120.0,
) -> tuple[list[str], list[str]]:
    """Boot a server per ``(image_id, name, disk_format)``; :returns: (lines, problems)."""
    api.request("POST", "/flavors", {"flavor": FLAVOR})
    created = []
    for image_id, name, _ in images:
        body = {"server": {"name": f"vm-{name}", "imageRef": image_id,
                           "flavorRef": FLAVOR["id"], "networks": "none"}}
        created.append(api.request("POST", "/servers", body).json()["server"]["id"])
    lines, problems = [], []
    for server_id, (image_id, _name, disk_format) in zip(created, images, strict=True):
        server = _wait_settled(api, server_id, timeout)
        able = _format_hosts(conf, hosts, disk_format)
        cached = sorted(host_images.hosts_with_image(db, image_id))
        why = (f"{disk_format} hosts {', '.join(able) or '-'}; cached on "
               f"{', '.join(cached) or '-'}")
        if server["status"] != "ACTIVE":
            message = server.get("fault", {}).get("message", server["status"])
            lines.append(f"  {server['name']}: {server['status']}: {message} ({why})")
            problems.append(f"server {server['name']} is {server['status']}")
            continue
        disk = db_instances.instance_get(db, server_id)["disk"] or {}
        source = "downloaded" if disk.get("image_fetched") else "from the cache, no download"
        lines.append(f"  {server['name']} -> {server['OS-EXT-SRV-ATTR:host']}: "
                     f"{disk.get('backend')} disk ({disk.get('format')}), image {source}; "
                     f"{why}; the weighers ranked it first")
    return lines, problems
