"""Write the tempest.conf that describes the running local stack, and make what Tempest needs.

Run by ``tools/tempest.sh`` with the stack's admin environment (``source .stack/env``): the
admin's ``OS_*`` (Keystone v3 password auth) and ``FLEETCACHE_SAMPLE_IMAGES`` (the qcow2 and
raw sample images' ids). Everything Tempest is told comes from the stack itself, not from
constants that could drift from it:

* the compute endpoint from the Keystone catalog, and the microversion range that its
  ``GET /v2.1/`` announces (Tempest then runs each microversioned test only inside it);
* the compute hosts from ``GET /os-services``;
* two flavors (``tempest-1``, ``tempest-2``) created when missing, and the sample images, for
  ``flavor_ref``/``flavor_ref_alt`` and ``image_ref``/``image_ref_alt``;
* which services and compute features exist. fleetcache serves the compute API only (no
  Neutron, Cinder, Swift, consoles, guest agent): every test that needs one of these is
  skipped by Tempest's own options below, each with the reason next to it.

Usage: ``python configure.py OUTPUT_DIR`` (writes OUTPUT_DIR/tempest.conf, prints a summary).
"""

from __future__ import annotations

import configparser
import os
import sys
from typing import Any

from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

#: Flavors Tempest boots its servers with: small enough for the stack's disk-driver computes,
#: big enough for the sample images (a few MiB, no min_disk/min_ram).
FLAVORS = (
    {"name": "tempest-1", "ram": 512, "vcpus": 1, "disk": 1},
    {"name": "tempest-2", "ram": 1024, "vcpus": 1, "disk": 2},
)

#: [compute-feature-enabled]: each feature that fleetcache's compute API does not offer, so
#: that Tempest skips the tests needing it (the reason is the comment).
COMPUTE_FEATURES = {
    "console_output": False,  # no guest console: os-getConsoleOutput is not served
    "vnc_console": False,  # no remote consoles
    "spice_console": False,
    "serial_console": False,
    "resize": False,  # no resize/migrate: a server stays on the host it was placed on
    "cold_migration": False,
    "live_migration": False,
    "pause": False,  # no guest lifecycle actions beyond create and delete
    "suspend": False,
    "shelve": False,
    "rescue": False,
    "snapshot": False,  # no createImage: servers are not snapshotted into Glance
    "change_password": False,  # no guest agent
    # The create answer carries adminPass, as Nova's with its default
    # [api] enable_instance_password = True: Tempest's response schema must allow it.
    "enable_instance_password": True,
    "metadata_service": False,  # no metadata service or config drive reaches a guest
    "config_drive": False,
    "personality": False,  # file injection, removed from Nova at 2.57
    "interface_attach": False,  # no Neutron ports
    "attach_encrypted_volume": False,  # no Cinder volumes
    "swap_volume": False,
    "volume_multiattach": False,
    "disk_config": False,  # no guest partitioning (OS-DCF: Nova's resize/rebuild tests)
    # Quotas are Keystone unified limits (issue 24), not Nova's legacy quota tables: Tempest
    # then skips the tests that update per-project quotas through os-quota-sets.
    "unified_limits": True,
}

#: [service_available]: what the stack's Keystone catalog holds (compute, image, placement).
SERVICES = {"nova": True, "glance": True, "neutron": False, "cinder": False, "swift": False,
            "horizon": False}


def env(name: str) -> str:
    """The stack's environment variable ``name``; a missing one names the fix."""
    try:
        return os.environ[name]
    except KeyError:
        sys.exit(f"tempest: ${name} is not set: source the stack's env (tools/stack.sh up)")


class Stack:
    """The admin's view of the running stack: Keystone session, compute endpoint."""

    def __init__(self) -> None:
        auth = v3.Password(
            auth_url=env("OS_AUTH_URL"), username=env("OS_USERNAME"),
            password=env("OS_PASSWORD"), project_name=env("OS_PROJECT_NAME"),
            user_domain_name=env("OS_USER_DOMAIN_NAME"),
            project_domain_name=env("OS_PROJECT_DOMAIN_NAME"))
        self.session = ks_session.Session(auth=auth, timeout=60)
        self.region = env("OS_REGION_NAME")
        url = self.session.get_endpoint(service_type="compute", interface="public",
                                        region_name=self.region)
        if not url:
            sys.exit("tempest: no public compute endpoint in the Keystone catalog")
        self.compute_url = url.rstrip("/")

    def compute(self, method: str, path: str, body: dict[str, Any] | None = None,
                version: str = "2.1") -> Any:
        """One compute API call (raises on any status >= 400)."""
        resp = self.session.request(
            self.compute_url + path, method, json=body, raise_exc=True,
            headers={"OpenStack-API-Version": f"compute {version}"})
        return resp.json() if resp.content else None

    def microversions(self) -> tuple[str, str]:
        """The (min, max) microversions the compute endpoint's version document announces."""
        doc = self.session.get(self.compute_url + "/", authenticated=False).json()["version"]
        return doc["min_version"], doc["version"]

    def ensure_flavors(self) -> list[str]:
        """The ids of FLAVORS, each created (public) when no flavor has its name."""
        existing = {f["name"]: f["id"] for f in
                    self.compute("GET", "/flavors/detail?is_public=None")["flavors"]}
        ids = []
        for flavor in FLAVORS:
            if flavor["name"] not in existing:
                made = self.compute("POST", "/flavors", {"flavor": dict(flavor)})
                existing[str(flavor["name"])] = made["flavor"]["id"]
            ids.append(existing[str(flavor["name"])])
        return ids

    def compute_hosts(self) -> list[str]:
        """Hosts of the compute services that are up and enabled."""
        services = self.compute("GET", "/os-services")["services"]
        return sorted(s["host"] for s in services if s["binary"].endswith("-compute")
                      and s["state"] == "up" and s["status"] == "enabled")


def build_conf(stack: Stack, out_dir: str) -> configparser.ConfigParser:
    """tempest.conf for ``stack``; Tempest's logs and locks under ``out_dir``."""
    min_mv, max_mv = stack.microversions()
    flavors = stack.ensure_flavors()
    images = env("FLEETCACHE_SAMPLE_IMAGES").split()
    if len(images) < 2:
        sys.exit("tempest: FLEETCACHE_SAMPLE_IMAGES names fewer than two images")
    hosts = stack.compute_hosts()
    if not hosts:
        sys.exit("tempest: no compute service is up (GET /os-services)")

    conf = configparser.ConfigParser(interpolation=None)
    conf["DEFAULT"] = {"log_dir": out_dir, "log_file": "tempest.log", "debug": "true",
                       "use_stderr": "false"}
    conf["oslo_concurrency"] = {"lock_path": os.path.join(out_dir, "lock")}
    conf["auth"] = {
        # Tempest makes a project and users per test class with the stack's admin.
        "use_dynamic_credentials": "true",
        "create_isolated_networks": "false",  # no Neutron
        "admin_username": env("OS_USERNAME"),
        "admin_password": env("OS_PASSWORD"),
        "admin_project_name": env("OS_PROJECT_NAME"),
        "admin_domain_name": env("OS_USER_DOMAIN_NAME"),
    }
    conf["identity"] = {"uri_v3": env("OS_AUTH_URL"), "auth_version": "v3",
                        "region": stack.region, "v3_endpoint_type": "public"}
    conf["compute"] = {
        "catalog_type": "compute",  # the endpoint is looked up in the catalog, as configured
        "region": stack.region,
        "endpoint_type": "publicURL",
        "min_microversion": min_mv,
        "max_microversion": max_mv,
        "image_ref": images[0],
        "image_ref_alt": images[1],
        "flavor_ref": flavors[0],
        "flavor_ref_alt": flavors[1],
        "min_compute_nodes": str(len(hosts)),
        # The disk driver makes a server in seconds; a minute is ample even on a busy machine.
        "build_timeout": "120",
        "build_interval": "1",
    }
    conf["compute-feature-enabled"] = {k: str(v).lower() for k, v in COMPUTE_FEATURES.items()}
    conf["service_available"] = {k: str(v).lower() for k, v in SERVICES.items()}
    conf["image"] = {"region": stack.region, "endpoint_type": "publicURL",
                     "build_timeout": "120"}
    # No guest is ever reached over a network: no SSH, ping or floating IP checks.
    conf["validation"] = {"run_validation": "false"}
    return conf


def main() -> None:
    """Write OUTPUT_DIR/tempest.conf."""
    if len(sys.argv) != 2:
        sys.exit("usage: configure.py OUTPUT_DIR")
    out_dir = sys.argv[1]
    stack = Stack()
    conf = build_conf(stack, out_dir)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "tempest.conf")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        conf.write(f)
    c = conf["compute"]
    print(f"tempest: wrote {path}: compute {stack.compute_url}, microversions "
          f"{c['min_microversion']}-{c['max_microversion']}, flavors {c['flavor_ref']} "
          f"{c['flavor_ref_alt']}, images {c['image_ref']} {c['image_ref_alt']}, "
          f"{c['min_compute_nodes']} computes")


if __name__ == "__main__":
    main()
