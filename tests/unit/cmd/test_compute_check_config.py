"""``fleetcache-compute --config-file F --check-config``: the real console script, in a
subprocess, on good and bad configuration files; and the same rules stopping a real start-up.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys

from oslo_config import cfg

from fleetcache.cmd import compute as compute_cmd
from fleetcache.cmd.common import EXIT_CONFIG

SCRIPT = pathlib.Path(sys.executable).parent / "fleetcache-compute"


def _check(tmp_path: pathlib.Path, text: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "compute.conf"
    path.write_text(f"[DEFAULT]\nhost = c1\nstate_path = {tmp_path}\n"
                    f"instances_path = {tmp_path / 'instances'}\n{text}")
    assert SCRIPT.is_file(), f"{SCRIPT} is not installed: pip install -e ."
    return subprocess.run([str(SCRIPT), "--config-file", str(path), "--check-config"],
                          capture_output=True, text=True, timeout=120, check=False)


def test_good_configuration_exits_0(tmp_path: pathlib.Path) -> None:
    done = _check(tmp_path, "[libvirt]\nimages_type = qcow2\n"
                            "images_type_mapping = raw:raw, qcow2:qcow2, vmdk:flat\n")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "configuration valid: 0 error(s), 0 warning(s)"
    assert not (tmp_path / "instances").exists()  # checking changes nothing on the host


def test_ambiguous_mapping_exits_1_naming_option_and_rule(tmp_path: pathlib.Path) -> None:
    done = _check(tmp_path, "[libvirt]\nimages_type_mapping = qcow2:raw, qcow2:qcow2\n")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[0] == (
        "ERROR: [libvirt] images_type_mapping: ambiguous conversion rule for source format "
        "qcow2: 'qcow2:raw' and 'qcow2:qcow2' (each source format may map to one backend only) "
        "(rule: ambiguous source)")
    assert lines[-1] == "configuration invalid: 1 error(s), 0 warning(s)"


def test_every_error_is_listed(tmp_path: pathlib.Path) -> None:
    done = _check(tmp_path, "force_raw_images = false\n[libvirt]\nimages_type = rbd\n"
                            "images_type_mapping = lvm:raw, iso:nosuch\n")
    assert done.returncode == 1
    out = done.stderr
    assert "[libvirt] images_type_mapping: entry 'lvm:raw'" in out
    assert "(rule: lvm/rbd as a source)" in out
    assert "unknown backend 'nosuch'" in out and "(rule: unknown backend)" in out
    assert ("ERROR: [DEFAULT] force_raw_images: must be true when [libvirt] images_type is rbd"
            in out)
    assert "(rule: rbd needs raw images)" in out


def test_missing_backend_tools_are_a_warning_when_checking(tmp_path: pathlib.Path) -> None:
    done = _check(tmp_path, "[libvirt]\nimages_type = lvm\nimages_volume_group = vg0\n")
    assert done.returncode == 0, done.stderr
    assert "WARNING: [libvirt] images_type: backend lvm " in done.stderr  # no tools, or
    assert "(rule: backend tools present)" in done.stderr or (  # not implemented yet
        "(rule: backend implemented)" in done.stderr)


def test_bad_value_is_still_a_configuration_error(tmp_path: pathlib.Path) -> None:
    done = _check(tmp_path, "[libvirt]\nimages_type = floppy\n")
    assert done.returncode == EXIT_CONFIG
    assert "[libvirt] images_type" in done.stderr


def test_real_start_up_refuses_what_the_check_refuses(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "compute.conf"
    path.write_text(f"[DEFAULT]\nhost = c1\ncompute_driver = disk\n"
                    f"instances_path = {tmp_path / 'instances'}\n"
                    "[libvirt]\nimages_type_mapping = qcow2:raw, qcow2:qcow2\n")
    try:
        code = compute_cmd.main(["--config-file", str(path)], cfg.ConfigOpts())
    except SystemExit as exc:
        code = int(exc.code or 0)
    assert code == EXIT_CONFIG


def test_long_call_limit_is_checked_against_the_rpc_workers(tmp_path: pathlib.Path) -> None:
    done = _check(tmp_path, "executor_thread_pool_size = 8\n")
    assert done.returncode == 0, done.stderr
    assert ("WARNING: [compute] max_concurrent_long_calls: [compute] max_concurrent_long_calls "
            "(24) is not below [DEFAULT] executor_thread_pool_size (8); 7 long calls are "
            "admitted") in done.stderr
    done = _check(tmp_path, "executor_thread_pool_size = 1\n")
    assert done.returncode == 1
    assert "ERROR: [DEFAULT] executor_thread_pool_size:" in done.stderr
