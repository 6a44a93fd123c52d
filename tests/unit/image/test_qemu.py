"""fleetcache.image.qemu: qemu-img under util-linux prlimit, limit hits named, convert flags."""

from __future__ import annotations

import pathlib
import signal
import struct
import threading
import time
from typing import Any

import pytest
from oslo_config import cfg
from oslo_utils import units

from fleetcache.common import config, exception
from fleetcache.image import _spawn, format_safety, qemu
from tests import hostile_images as corpus
from tests.unit.image import fixtures

CLUSTER = 1 << 16


def check_bomb(directory: pathlib.Path, l1_entries: int = 65536) -> pathlib.Path:
    """A 512 KiB qcow2 the format inspector and ``qemu-img info`` find fine, whose every L1
    entry points at one L2 table whose every entry points at one data cluster: ``qemu-img
    check`` walks 2^29 entries (over 10 s of CPU; a 32 MiB file makes it hours)."""
    l1_off, refcount_table, refcount_block, l2_off, data_off = 5, 1, 2, 3, 4
    l1_clusters = max(1, l1_entries * 8 // CLUSTER)
    clusters = 5 + l1_clusters
    size = l1_entries * (CLUSTER // 8) * CLUSTER
    header = struct.pack(">4sIQIIQIIQQIIQ", b"QFI\xfb", 3, 0, 0, 16, size, 0, l1_entries,
                         l1_off * CLUSTER, refcount_table * CLUSTER, 1, 0, 0)
    header += struct.pack(">QQQII", 0, 0, 0, 6, 104) + struct.pack(">II", 0, 0)  # 64-bit refs
    image = bytearray(clusters * CLUSTER)
    image[: len(header)] = header
    struct.pack_into(">Q", image, refcount_table * CLUSTER, refcount_block * CLUSTER)
    for i in range(clusters):
        struct.pack_into(">Q", image, refcount_block * CLUSTER + 8 * i, 1)
    copied = 1 << 63
    for i in range(CLUSTER // 8):
        struct.pack_into(">Q", image, l2_off * CLUSTER + 8 * i, data_off * CLUSTER | copied)
    for i in range(l1_entries):
        struct.pack_into(">Q", image, l1_off * CLUSTER + 8 * i, l2_off * CLUSTER | copied)
    path = directory / "check-bomb.qcow2"
    path.write_bytes(bytes(image))
    return path


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[str, ...], Any]]:
    recorded: list[tuple[tuple[str, ...], Any]] = []
    real = qemu.execute

    def spy(*cmd: str, **kwargs: Any) -> Any:
        recorded.append((cmd, kwargs.get("prlimit")))
        return real(*cmd, **kwargs)

    monkeypatch.setattr(qemu, "execute", spy)
    return recorded


def test_limited_child_really_runs_under_the_limits() -> None:
    """What the kernel enforces in the child, read back by the child itself."""
    limits = qemu.ProcessLimits(cpu_time=7, address_space=3 * units.Gi)
    done = qemu.execute("sh", "-c", "ulimit -t; ulimit -v; ulimit -f; ulimit -c", prlimit=limits)
    assert done.returncode == 0
    assert done.stdout.split() == ["7", str(3 * units.Gi // 1024), str(qemu.OUTPUT_LIMIT // 512),
                                   "0"]


def test_info_and_check_run_qemu_img_under_prlimit(tmp_path: pathlib.Path,
                                                   calls: list[Any]) -> None:
    image = str(corpus.qcow2(tmp_path, size="8M"))
    assert qemu.info(image, "qcow2", cpu_time_s=30, address_space_gib=2)["virtual-size"] == \
        8 * units.Mi
    assert qemu.check(image, "qcow2", cpu_time_s=30, address_space_gib=2)["check-errors"] == 0
    assert [cmd[:2] for cmd, _ in calls] == [("qemu-img", "info"), ("qemu-img", "check")]
    assert {limits for _, limits in calls} == {qemu.ProcessLimits(30, 2 * units.Gi)}
    assert qemu.ProcessLimits(30, 2 * units.Gi).prefix() == [
        "prlimit", "--cpu=30:31", f"--as={2 * units.Gi}", f"--fsize={qemu.OUTPUT_LIMIT}",
        "--core=0", "--"]


def test_tiny_address_space_is_named_in_the_error(tmp_path: pathlib.Path) -> None:
    image = str(corpus.qcow2(tmp_path))
    with pytest.raises(exception.QemuImgError) as caught:
        qemu.info(image, "qcow2", cpu_time_s=30, address_space_gib=0.03)
    message = str(caught.value)
    assert message.startswith("qemu-img info failed: out of memory under the address space "
                              "limit of 0.03 GiB ([libvirt] images_address_space_limit): ")


def test_check_bomb_is_killed_at_the_cpu_limit(tmp_path: pathlib.Path) -> None:
    bomb = str(check_bomb(tmp_path))
    assert qemu.info(bomb, "qcow2", cpu_time_s=30, address_space_gib=2)["format"] == "qcow2"
    with pytest.raises(exception.QemuImgError,
                       match=r"^qemu-img check failed: killed by SIGXCPU after \d\.\d s of CPU: "
                             r"over the CPU time limit of 1 s "
                             r"\(\[libvirt\] images_cpu_time_limit\)$"):
        qemu.check(bomb, "qcow2", cpu_time_s=1, address_space_gib=2)


def test_check_bomb_is_refused_by_inspection_naming_the_limit(tmp_path: pathlib.Path) -> None:
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([])
    conf.set_override("images_cpu_time_limit", 1, group="libvirt")
    with pytest.raises(exception.ImageFormatRejected,
                       match=r"qemu-img check -f qcow2 refused it: qemu-img check failed: "
                             r"killed by SIGXCPU .* images_cpu_time_limit"):
        format_safety.inspect_image(str(check_bomb(tmp_path)), "qcow2", conf, image_id="bomb")


def test_output_beyond_the_limit_stops_the_command() -> None:
    limits = qemu.ProcessLimits(cpu_time=30, address_space=2 * units.Gi)
    done = qemu.execute("sh", "-c", f"head -c {qemu.OUTPUT_LIMIT + 1} /dev/zero",
                        prlimit=limits)
    assert done.returncode != 0
    assert len(done.stdout) == qemu.OUTPUT_LIMIT


def test_a_kill_below_the_cpu_limit_is_not_blamed_on_it(tmp_path: pathlib.Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "fake-qemu-img"
    script.write_text("#!/bin/sh\necho 'going away' >&2\nkill -KILL $$\n")
    script.chmod(0o755)
    monkeypatch.setattr(qemu, "QEMU_IMG", str(script))
    with pytest.raises(exception.QemuImgError,
                       match=r"^qemu-img info failed: killed by SIGKILL: going away$"):
        qemu.info(str(tmp_path / "x"), "raw", cpu_time_s=30, address_space_gib=2)
    assert -signal.SIGKILL == qemu.execute(str(script)).returncode


@pytest.mark.parametrize("action", ["info", "convert"])
def test_missing_qemu_img_is_a_qemu_img_error(tmp_path: pathlib.Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              action: str) -> None:
    monkeypatch.setattr(qemu, "QEMU_IMG", "/nonexistent/qemu-img")
    with pytest.raises(exception.QemuImgError, match=f"qemu-img {action} failed: .*No such file"):
        if action == "info":  # through prlimit, which cannot exec it
            qemu.info(str(tmp_path / "x"), "raw", cpu_time_s=30, address_space_gib=2)
        else:  # spawned directly
            qemu.convert(str(tmp_path / "x"), "qcow2", str(tmp_path / "y"), timeout_s=60)


def test_failure_reason_is_the_last_error_line(tmp_path: pathlib.Path) -> None:
    missing = str(tmp_path / "missing.qcow2")
    with pytest.raises(exception.QemuImgError,
                       match=r"^qemu-img info failed: qemu-img: Could not open .*missing\.qcow2"):
        qemu.info(missing, "qcow2", cpu_time_s=30, address_space_gib=2)


@pytest.mark.parametrize(("kwargs", "flags"), [
    ({}, []),
    ({"cache": "none"}, ["-t", "none"]),
    ({"cache": "writeback", "out_of_order": True}, ["-t", "writeback", "-W"]),
])
def test_convert_flags(tmp_path: pathlib.Path, calls: list[Any], kwargs: dict[str, Any],
                       flags: list[str]) -> None:
    src, dst = corpus.qcow2_with_data(tmp_path), tmp_path / "out.raw"
    qemu.convert(str(src), "qcow2", str(dst), timeout_s=60, **kwargs)
    assert calls == [(("qemu-img", "convert", "-f", "qcow2", "-O", "raw", *flags, str(src),
                       str(dst)), None)]
    assert dst.read_bytes()[:10] == b"FLEETCACHE"


def test_convert_refuses_an_unknown_cache_mode(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="unknown qemu-img cache mode"):
        qemu.convert(str(tmp_path / "a"), "qcow2", str(tmp_path / "b"), timeout_s=60,
                     cache="direct")


def test_relative_paths_are_refused() -> None:
    with pytest.raises(ValueError, match="must be absolute"):
        qemu.info("image.qcow2", "qcow2", cpu_time_s=30, address_space_gib=2)


def test_timeout_kills_the_whole_process_group(tmp_path: pathlib.Path) -> None:
    """A command still running at its timeout is killed with everything it started."""
    pidfile = tmp_path / "child.pid"
    began = time.monotonic()
    done = qemu.execute("sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait", timeout=1)
    assert time.monotonic() - began < 5
    assert (done.timed_out, done.signal) == (True, "SIGKILL")
    assert fixtures.process_gone(int(pidfile.read_text()))


def test_a_command_that_ends_in_time_is_not_timed_out() -> None:
    began = time.monotonic()
    done = qemu.execute("sh", "-c", "sleep 0.2; echo done", timeout=30)
    assert time.monotonic() - began < 5
    assert (done.returncode, done.timed_out, done.stdout) == (0, False, "done\n")


def test_a_killed_command_that_does_not_die_is_reaped_by_a_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As a process in uninterruptible I/O: SIGKILL is pending, the caller must not wait."""
    reaped = threading.Event()
    real_reap = _spawn._reap  # noqa: SLF001

    def reap(pid: int) -> None:
        real_reap(pid)
        reaped.set()

    monkeypatch.setattr(_spawn, "_exits_within", lambda pid, timeout: False)
    monkeypatch.setattr(_spawn, "_reap", reap)
    began = time.monotonic()
    done = qemu.execute("sleep", "60", timeout=0.1)
    assert time.monotonic() - began < _spawn.KILL_GRACE
    assert (done.timed_out, done.signal) == (True, "SIGKILL")
    assert reaped.wait(5)


@pytest.mark.parametrize(("action", "option"), [("convert", "images_convert_timeout"),
                                                 ("create", "images_create_timeout")])
def test_convert_and_create_are_killed_at_their_time_limit(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, action: str,
        option: str) -> None:
    pidfile = fixtures.hanging_qemu_img(tmp_path, monkeypatch, action)
    src, out = corpus.qcow2_with_data(tmp_path), tmp_path / "out"
    began = time.monotonic()
    with pytest.raises(exception.QemuImgError) as caught:
        if action == "convert":
            qemu.convert(str(src), "qcow2", str(out), timeout_s=1)
        else:
            qemu.create_overlay(str(src), "qcow2", str(out), timeout_s=1)
    assert time.monotonic() - began < 5
    assert str(caught.value) == (f"qemu-img {action} failed: did not finish within the time "
                                 f"limit of 1 s ([libvirt] {option}) and was killed")
    assert fixtures.process_gone(int(pidfile.read_text()))
