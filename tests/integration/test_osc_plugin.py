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
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Stack
from tests.integration.stackops import (
    fleetcache_cli,
    get_job,
    pin_length,
    short_wait_terms,
    terms_options,
    wait_job_done,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GROUPS = ("openstack.cli.extension", "openstack.fleetcache.v1")
#: Seconds of the pins the tests ask for: short, as the other pinning tests', so that no
#: sample image stays pinned into a later test's ageing.
PIN = 15


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``PYTHONPATH`` under which ``openstack`` loads this tree's plugin with every command of
    ``setup.cfg``, also those the installed metadata lacks (a venv installed from an older
    tree): only the missing entry points go into the throwaway ``dist-info``, since a second
    ``openstack.cli.extension`` of the same name would register the plugin's options twice."""
    path = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    points = setup["options.entry_points"]
    missing = {}
    for group in GROUPS:
        installed = {f"{ep.name} = {ep.value}"
                     for ep in importlib.metadata.entry_points(group=group)}
        wanted = [line.strip() for line in points[group].splitlines() if line.strip()]
        missing[group] = [line for line in wanted if line not in installed]
    if not any(missing.values()):
        return os.pathsep.join(p for p in path if p)
    dist = tmp_path_factory.mktemp("osc") / "fleetcache_osc_plugin-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fleetcache-osc-plugin\n"
                                   "Version: 0\n")
    (dist / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{line}\n" for line in lines)
        for group, lines in missing.items() if lines))
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


def _job_command(stack: Stack, plugin_path: str, *args: str, check: bool = True) -> Any:
    return _openstack(stack, plugin_path, "aggregate", "cache", "job", *args, check=check)


def _states(job: dict[str, Any]) -> dict[str, str]:
    return {h["host"]: h["images"][0]["state"] for h in job["hosts"]}


def test_cache_job_create_wait_list_show_as_json(stack: Stack, plugin_path: str,
                                                 make_aggregate: Any) -> None:
    """Every command's machine-readable output, parsed: the job and its per-host states as
    the API shows them, through both clients."""
    agg = make_aggregate(hosts=("compute1", "compute3"))
    image = stack.sample_images[1]
    proc = _job_command(stack, plugin_path, "create", agg["name"], image, "--wait",
                        "--timeout", "120", "-f", "json")
    assert "2/2 hosts" in proc.stderr  # the progress bar, off stdout
    created = json.loads(proc.stdout)
    assert created["state"] == "done" and created["image_ids"] == [image]
    states = _states(created)
    assert sorted(states) == ["compute1", "compute3"]
    assert set(states.values()) <= {"cached", "existing"}, states

    listed = _job_command(stack, plugin_path, "list", agg["name"], "-f", "value",
                          "-c", "ID", "-c", "State").stdout.split()
    assert listed == [created["id"], "done"], listed

    shown = json.loads(_job_command(stack, plugin_path, "show", created["id"], "--aggregate",
                                    str(agg["id"]), "-f", "json").stdout)
    api_job = get_job(stack, agg["id"], created["id"])
    assert shown == {k: v for k, v in api_job.items() if k != "links"}
    assert shown["counts"]["error"] == 0 and shown["hosts_reported"] == 2

    rows = json.loads(_job_command(stack, plugin_path, "host", "list", created["id"],
                                   "-f", "json").stdout)
    assert {r["Host"]: r["State"] for r in rows} == states
    assert {r["Image ID"] for r in rows} == {image}

    # fleetcache's own client says the same, with the API's keys
    cli = fleetcache_cli(stack, "jobs", "show", created["id"], "-f", "json")
    assert cli.returncode == 0, cli.stderr
    assert {k: v for k, v in json.loads(cli.stdout).items() if k != "links"} == shown


def test_cache_job_create_with_a_pin(stack: Stack, plugin_path: str,
                                     make_aggregate: Any) -> None:
    agg = make_aggregate(hosts=("compute3",))
    image = stack.sample_images[0]
    created = json.loads(_job_command(stack, plugin_path, "create", agg["name"], image,
                                      "--pin-seconds", str(PIN), "--wait", "--timeout", "120",
                                      "-f", "json").stdout)
    assert created["state"] == "done", created
    assert abs(pin_length(created) - PIN) < 5, created  # from the creation, give or take

    malformed = _job_command(stack, plugin_path, "create", agg["name"], image,
                             "--pin-seconds", "1d", check=False)
    assert malformed.returncode == 2
    assert ("argument --pin-seconds: '1d' is not a whole number of seconds"
            in malformed.stderr), malformed.stderr
    too_long = _job_command(stack, plugin_path, "create", agg["name"], image,
                            "--pin-seconds", "99999999", check=False)
    assert too_long.returncode == 1
    assert ("HTTP 400: Invalid input for field/attribute fleetcache:pin_seconds. Value: "
            "99999999. 99999999 is greater than the maximum of 31622400") in too_long.stderr
    assert len(json.loads(_job_command(stack, plugin_path, "list", agg["name"],
                                       "-f", "json").stdout)) == 1  # no job for the refusal


def test_cache_job_list_refused_to_a_member(stack: Stack, plugin_path: str,
                                            make_aggregate: Any) -> None:
    agg = make_aggregate()
    proc = _openstack(stack, plugin_path, "aggregate", "cache", "job", "list", str(agg["id"]),
                      user="member", check=False)
    assert proc.returncode != 0
    assert "HTTP 403" in proc.stderr and "Policy doesn't allow" in proc.stderr, proc.stderr


def test_show_and_list_take_columns_in_every_machine_format(stack: Stack, plugin_path: str,
                                                            make_aggregate: Any) -> None:
    agg = make_aggregate(hosts=("compute1",))
    image = stack.sample_images[0]
    created = json.loads(_job_command(stack, plugin_path, "create", agg["name"], image,
                                      "--wait", "--timeout", "120", "-f", "json").stdout)
    shown = json.loads(_job_command(stack, plugin_path, "show", created["id"], "-f", "json",
                                    "-c", "state", "-c", "terms", "-c", "next_start_at"
                                    ).stdout)
    assert shown == {"state": "done", "terms": {}, "next_start_at": None}
    value = _job_command(stack, plugin_path, "show", created["id"], "-f", "value",
                         "-c", "id", "-c", "state").stdout.split()
    assert value == [created["id"], "done"]
    shell = _job_command(stack, plugin_path, "show", created["id"], "-f", "shell",
                         "-c", "total_hosts").stdout
    assert shell == 'total_hosts="1"\n'
    rows = json.loads(_job_command(stack, plugin_path, "list", agg["name"], "--long",
                                   "-f", "json", "-c", "ID", "-c", "Terms",
                                   "-c", "Next Start At").stdout)
    assert rows == [{"ID": created["id"], "Terms": {}, "Next Start At": None}]
    yaml_rows = _job_command(stack, plugin_path, "list", agg["name"], "-f", "yaml",
                             "-c", "State").stdout
    assert yaml_rows.strip() == "- State: done"
    cli = json.loads(fleetcache_cli(stack, "jobs", "show", created["id"], "-f", "json").stdout)
    assert {k: v for k, v in cli.items() if k != "links"} == {
        k: v for k, v in get_job(stack, agg["id"], created["id"]).items() if k != "links"}


def test_create_refuses_terms_before_or_through_the_api(stack: Stack, plugin_path: str,
                                                        make_aggregate: Any) -> None:
    agg = make_aggregate(hosts=("compute3",))
    image = stack.sample_images[0]
    malformed = _job_command(stack, plugin_path, "create", agg["name"], image,
                             "--job-rate", "8X", check=False)
    assert malformed.returncode == 2
    assert "argument --job-rate: '8X' is not a rate" in malformed.stderr, malformed.stderr
    refused = _job_command(stack, plugin_path, "create", agg["name"], image,
                           "--deadline", "2000-01-01T00:00:00Z", check=False)
    assert refused.returncode == 1
    assert ("HTTP 400: Invalid input: fleetcache:deadline: 2000-01-01T00:00:00Z is already "
            "past") in refused.stderr, refused.stderr
    assert json.loads(_job_command(stack, plugin_path, "list", agg["name"],
                                   "-f", "json").stdout) == []


def test_create_with_terms_and_read_them_back(stack: Stack, plugin_path: str,
                                              make_aggregate: Any) -> None:
    agg = make_aggregate(hosts=("compute1", "compute3"))
    image = stack.sample_images[1]
    terms = short_wait_terms(wait=30)
    created = json.loads(_job_command(stack, plugin_path, "create", agg["name"], image,
                                      *terms_options(terms), "-f", "json").stdout)
    assert created["terms"] == terms and created["state"] in ("queued", "scheduled")
    shown = json.loads(_job_command(stack, plugin_path, "show", created["id"], "-f", "json",
                                    "-c", "terms").stdout)
    assert shown == {"terms": terms}
    assert get_job(stack, agg["id"], created["id"])["terms"] == terms

    job = wait_job_done(stack, agg["id"], created["id"], timeout=180)
    assert job["state"] == "done" and job["terms"] == terms, job
    shown = json.loads(_job_command(stack, plugin_path, "show", created["id"], "-f", "json",
                                    "-c", "state", "-c", "next_start_at").stdout)
    assert shown == {"state": "done", "next_start_at": None}

