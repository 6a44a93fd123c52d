"""The generated sample files in etc/fleetcache must match what the code registers."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent


def _generate(tool: str, args: list[str], out: pathlib.Path) -> str:
    subprocess.run([str(BIN / tool), *args, "--output-file", str(out)], check=True,
                   capture_output=True)
    return out.read_text()


def test_config_sample_is_current(tmp_path: pathlib.Path) -> None:
    generated = _generate(
        "oslo-config-generator",
        ["--namespace", "fleetcache", "--namespace", "oslo.messaging", "--namespace", "oslo.log",
         "--namespace", "keystonemiddleware.auth_token", "--namespace", "oslo.limit"],
        tmp_path / "fleetcache.conf.sample",
    )
    committed = (ROOT / "etc/fleetcache/fleetcache.conf.sample").read_text()
    assert generated == committed, "fleetcache.conf.sample is stale: run `make genconfig`"


def test_policy_sample_is_current(tmp_path: pathlib.Path) -> None:
    generated = _generate(
        "oslopolicy-sample-generator", ["--namespace", "fleetcache"],
        tmp_path / "policy.yaml.sample",
    )
    committed = (ROOT / "etc/fleetcache/policy.yaml.sample").read_text()
    assert generated == committed, "policy.yaml.sample is stale: run `make genconfig`"


@pytest.mark.parametrize("group", ["DEFAULT", "api", "database", "glance", "image_cache",
                                   "fleetcache_privsep", "quota", "oslo_limit"])
def test_sample_documents_group(group: str) -> None:
    sample = (ROOT / "etc/fleetcache/fleetcache.conf.sample").read_text()
    assert f"[{group}]" in sample


def test_sample_lists_privsep_options_under_the_context_group() -> None:
    """oslo.privsep registers its options on the global CONF only when the compute builds its
    context; the sample must still show them, under the group that context reads."""
    from fleetcache import privsep

    sample = (ROOT / "etc/fleetcache/fleetcache.conf.sample").read_text()
    section = sample.split(f"[{privsep.CFG_SECTION}]\n", 1)[1].split("\n[", 1)[0]
    for option in ("helper_command", "user", "group", "capabilities"):
        assert f"#{option} =" in section, option
