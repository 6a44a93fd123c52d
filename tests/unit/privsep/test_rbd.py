"""Unit tests of the privileged rbd export (fleetcache.privsep.rbd): its refusals, its
command line, and its handling of a failing, hanging or missing ``rbd``."""

from __future__ import annotations

import hashlib
import os
import pathlib
import stat
import threading

import pytest

from fleetcache.privsep import compute_ctx
from fleetcache.privsep import rbd as privsep_rbd
from fleetcache.privsep.rbd import RbdExportError, export_command, run_export

SHA1 = hashlib.sha1(b"img", usedforsecurity=False).hexdigest()


@pytest.fixture
def base(tmp_path: pathlib.Path) -> pathlib.Path:
    base = tmp_path / "_base"
    base.mkdir()
    return base


@pytest.fixture
def ceph_files(tmp_path: pathlib.Path) -> tuple[str, str]:
    conf, keyring = tmp_path / "ceph.conf", tmp_path / "ceph.client.compute.keyring"
    conf.write_text("[global]\nfsid = 7d3c1f0e-2a4b-4c5d-8e9f-0a1b2c3d4e5f\n")
    keyring.write_text("[client.compute]\n\tkey = x\n")
    return str(conf), str(keyring)


@pytest.fixture
def fifo(base: pathlib.Path) -> str:
    path = base / f".{SHA1}.part-rbd1234"
    os.mkfifo(path, 0o600)
    return str(path)


def _args(base: pathlib.Path, ceph_files: tuple[str, str], dest: str,
          **changes: object) -> dict[str, object]:
    args: dict[str, object] = dict(
        pool="images", image="8c4f0d5e-1a2b-4c3d-9e8f-7a6b5c4d3e2f", snapshot="snap",
        user="compute", ceph_conf=ceph_files[0], keyring=ceph_files[1], base_dir=str(base),
        destination=dest, connect_timeout=5, osd_op_timeout=30, time_limit=60)
    args.update(changes)
    return args


def _refused(match: str, **args: object) -> None:
    with pytest.raises(RbdExportError, match=match):
        run_export(**args)  # type: ignore[arg-type]


def test_the_entrypoint_belongs_to_the_compute_context_and_runs_the_checked_body() -> None:
    assert compute_ctx.is_entrypoint(privsep_rbd.export_to_fifo)
    assert compute_ctx.conf.capabilities == []


@pytest.mark.parametrize("name", ["-x", "--pool=x", ".hidden", "..", "a/b", "a@b", "a b",
                                  "a;rm", "a$(id)", "", "a\nb", "x" * 256, "é"])
@pytest.mark.parametrize("what", ["pool", "image", "snapshot", "user"])
def test_names_outside_cephs_characters_are_refused(base, ceph_files, fifo, what, name):
    _refused(f"{what} .* is not a valid Ceph name",
             **_args(base, ceph_files, fifo, **{what: name}))


def test_destination_outside_base_is_refused(base, ceph_files, tmp_path):
    outside = tmp_path / f".{SHA1}.part-rbd1234"
    os.mkfifo(outside)
    _refused("not a temporary name", **_args(base, ceph_files, str(outside)))


def test_destination_with_dotdot_is_refused(base, ceph_files, fifo, tmp_path):
    sneaky = str(base / ".." / "_base" / os.path.basename(fifo))
    _refused("not a temporary name", **_args(base, ceph_files, sneaky))
    _refused("not a temporary name", **_args(base, ceph_files, str(base / "..")))


def test_destination_symlink_is_refused(base, ceph_files, tmp_path):
    target = tmp_path / "elsewhere"
    os.mkfifo(target)
    link = base / f".{SHA1}.part-link"
    link.symlink_to(target)
    _refused("is not a FIFO", **_args(base, ceph_files, str(link)))


@pytest.mark.parametrize("name", ["-x", "--path=x", f"-{SHA1}.part-x", "disk", SHA1,
                                  f".{SHA1}.part-", f".{SHA1}.part-a/b"])
def test_destination_with_an_option_like_or_final_name_is_refused(base, ceph_files, name):
    _refused("not a temporary name", **_args(base, ceph_files, str(base / name)))


def test_relative_destination_is_refused(base, ceph_files, fifo, monkeypatch):
    monkeypatch.chdir(base)
    _refused("not a temporary name", **_args(base, ceph_files, os.path.basename(fifo)))


def test_destination_that_is_a_regular_file_is_refused(base, ceph_files):
    plain = base / f".{SHA1}.part-file"
    plain.write_bytes(b"")
    _refused("is not a FIFO", **_args(base, ceph_files, str(plain)))


def test_symlinked_base_directory_is_refused(base, ceph_files, tmp_path):
    link = tmp_path / "base-link"
    link.symlink_to(base)
    dest = link / f".{SHA1}.part-rbd1"
    os.mkfifo(dest)
    _refused("not a canonical path", **_args(link, ceph_files, str(dest)))


@pytest.mark.parametrize("field", ["ceph_conf", "keyring"])
@pytest.mark.parametrize("value", ["-c", "relative.conf", "/nonexistent/ceph.conf", "/tmp"])
def test_ceph_files_must_be_absolute_regular_files(base, ceph_files, fifo, field, value):
    _refused("not an absolute path|not a regular file",
             **_args(base, ceph_files, fifo, **{field: value}))


@pytest.mark.parametrize("value", [0, -1, True, "5", 10**9, 1.5])
def test_timeouts_must_be_whole_seconds(base, ceph_files, fifo, value):
    _refused("not a number of seconds", **_args(base, ceph_files, fifo, time_limit=value))


def test_command_binds_every_value_to_its_option_and_uses_no_shell() -> None:
    argv = export_command("/usr/bin/rbd", "images", "img", "snap", "compute", "/c/ceph.conf",
                          "/c/k", 5, 30)
    assert argv == [
        "/usr/bin/rbd", "--conf=/c/ceph.conf", "--id=compute", "--keyring=/c/k",
        "--client-mount-timeout=5", "--rados-mon-op-timeout=5", "--rados-osd-op-timeout=30",
        "export", "--no-progress", "--pool=images", "--image=img", "--snap=snap", "--path=-"]


def _fake_rbd(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "rbd"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")


def _read_all(path: str, out: list[bytes]) -> threading.Thread:
    def run() -> None:
        with open(path, "rb") as f:
            out.append(f.read())
    t = threading.Thread(target=run)
    t.start()
    return t


def test_export_streams_rbds_stdout_into_the_fifo(base, ceph_files, fifo, tmp_path,
                                                   monkeypatch):
    _fake_rbd(tmp_path, monkeypatch, 'echo "$@" >&2; printf exported-bytes')
    out: list[bytes] = []
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        reader = _read_all(f"/proc/self/fd/{fd}", out)
        assert run_export(**_args(base, ceph_files, fifo)) == 0  # type: ignore[arg-type]
        reader.join(10)
    finally:
        os.close(fd)
    assert out == [b"exported-bytes"]


def test_export_without_a_reader_fails(base, ceph_files, fifo, tmp_path, monkeypatch):
    _fake_rbd(tmp_path, monkeypatch, "printf x")
    _refused("no reader", **_args(base, ceph_files, fifo))


def test_permission_error_of_rbd_is_named(base, ceph_files, fifo, tmp_path, monkeypatch):
    _fake_rbd(tmp_path, monkeypatch, 'echo "rbd: error opening image img: (1) Operation not '
              'permitted" >&2; exit 1')
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        _refused("^permission denied: rbd export of images/.*@snap exited 1: rbd: error",
                 **_args(base, ceph_files, fifo))
    finally:
        os.close(fd)


def test_export_over_the_time_limit_is_killed(base, ceph_files, fifo, tmp_path, monkeypatch):
    _fake_rbd(tmp_path, monkeypatch, "sleep 30")
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        _refused("killed after the time limit of 1 s",
                 **_args(base, ceph_files, fifo, time_limit=1))
    finally:
        os.close(fd)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_failure_keeps_rbds_own_lines_not_librados_log(base, ceph_files, fifo, tmp_path,
                                                       monkeypatch):
    _fake_rbd(tmp_path, monkeypatch, "\n".join([
        'echo "2026-11-22T19:45:45.735+0000 7f29 -1 librbd::io::ObjectRequest: failed" >&2',
        'echo "rbd: error reading from source image at offset 0: (110) Connection timed out" >&2',
        'echo "rbd: export error: (110) Connection timed out" >&2', "exit 110"]))
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(RbdExportError) as caught:
            run_export(**_args(base, ceph_files, fifo))  # type: ignore[arg-type]
    finally:
        os.close(fd)
    assert str(caught.value) == (
        "rbd export of images/8c4f0d5e-1a2b-4c3d-9e8f-7a6b5c4d3e2f@snap exited 110: "
        "rbd: error reading from source image at offset 0: (110) Connection timed out; "
        "rbd: export error: (110) Connection timed out")
