"""``openstack aggregate cache job ...``: fleetcache's client plugin in the unmodified
``openstack`` client, authenticated by the stack's Keystone, against the real stack.

The plugin's entry points are those of ``setup.cfg``; when the installed fleetcache predates
them (a venv installed before the plugin existed), a throwaway ``dist-info`` declaring the same
entry points is put on the client's ``PYTHONPATH``: ``openstack`` finds plugins through package
metadata only.
"""

from __future__ import annotations

import configparser
import importlib.metadata
import os
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Stack

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GROUPS = ("openstack.cli.extension", "openstack.fleetcache.v1")


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``PYTHONPATH`` under which ``openstack`` loads this tree's plugin."""
    path = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    if any(ep.name == "fleetcache"
           for ep in importlib.metadata.entry_points(group="openstack.cli.extension")):
        return os.pathsep.join(p for p in path if p)
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    points = setup["options.entry_points"]
    dist = tmp_path_factory.mktemp("osc") / "fleetcache_osc_plugin-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fleetcache-osc-plugin\n"
                                   "Version: 0\n")
    (dist / "entry_points.txt").write_text(
        "".join(f"[{group}]\n{points[group].strip()}\n" for group in GROUPS))
    return os.pathsep.join(p for p in [str(dist.parent), *path] if p)


def _openstack(stack: Stack, plugin_path: str, *args: str, user: str = "admin",
               check: bool = True) -> Any:
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = plugin_path
    try:
        return stack.run_openstack(*args, user=user, check=check)
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


def test_cache_job_create_wait_list_show(stack: Stack, plugin_path: str,
                                         make_aggregate: Any) -> None:
    agg = make_aggregate(hosts=("compute1", "compute3"))
    image = stack.sample_images[1]
    proc = _openstack(stack, plugin_path, "aggregate", "cache", "job", "create", agg["name"],
                      image, "--wait", "--timeout", "120")
    assert "2/2 hosts" in proc.stderr  # the progress bar
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| compute")]
    assert sorted(r.split("|")[1].strip() for r in rows) == ["compute1", "compute3"]
    assert all(r.split("|")[2].strip() in ("cached", "existing") for r in rows), rows
    listed = _openstack(stack, plugin_path, "aggregate", "cache", "job", "list", agg["name"],
                        "-f", "value", "-c", "ID", "-c", "State").stdout.split()
    assert listed[1] == "done", listed
    shown = _openstack(stack, plugin_path, "aggregate", "cache", "job", "show", listed[0],
                       "--aggregate", str(agg["id"])).stdout
    assert f"Job {listed[0]} on aggregate {agg['id']}: done" in shown


def test_cache_job_list_refused_to_a_member(stack: Stack, plugin_path: str,
                                            make_aggregate: Any) -> None:
    agg = make_aggregate()
    proc = _openstack(stack, plugin_path, "aggregate", "cache", "job", "list", str(agg["id"]),
                      user="member", check=False)
    assert proc.returncode != 0
    assert "HTTP 403" in proc.stderr and "Policy doesn't allow" in proc.stderr, proc.stderr
