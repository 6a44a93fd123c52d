"""Unit tests of the privileged rbd export (fleetcache.privsep.rbd): its refusals, its
command line, its handling of a failing, hanging or missing ``rbd``, and that the Ceph user,
files, timeouts and base directory come from the daemon's configuration, never the caller."""

from __future__ import annotations

import hashlib
import inspect
import os
import pathlib
import stat
import threading
from collections.abc import Iterator

import pytest
from oslo_config import cfg

from fleetcache import privsep
from fleetcache.common.rbd_settings import RbdSettings
from fleetcache.privsep import compute_ctx
from fleetcache.privsep import rbd as privsep_rbd
from fleetcache.privsep.rbd import (
    ExportSettings,
    RbdExportError,
    check_fifo_fd,
    configured_settings,
    export_command,
    run_export,
)

SHA1 = hashlib.sha1(b"img", usedforsecurity=False).hexdigest()
IMAGE = "8c4f0d5e-1a2b-4c3d-9e8f-7a6b5c4d3e2f"


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


def _settings(base: pathlib.Path, ceph_files: tuple[str, str],
              **changes: object) -> ExportSettings:
    """What a daemon's configuration would give, with ``changes`` (``base_dir`` or a field of
    :class:`RbdSettings`): typed loosely on purpose, the checks are under test."""
    base_dir = changes.pop("base_dir", str(base))
    rbd: dict[str, object] = dict(user="compute", ceph_conf=ceph_files[0],
                                  keyring=ceph_files[1], connect_timeout=5, osd_op_timeout=30,
                                  export_timeout=60)
    rbd.update(changes)
    return ExportSettings(rbd=RbdSettings(**rbd), base_dir=base_dir)  # type: ignore[arg-type]


def _request(dest: str, **changes: object) -> dict[str, object]:
    request: dict[str, object] = dict(pool="images", image=IMAGE, snapshot="snap",
                                      destination=dest)
    request.update(changes)
    return request


def _refused(match: str, settings: ExportSettings, **request: object) -> None:
    with pytest.raises(RbdExportError, match=match):
        run_export(settings, **request)  # type: ignore[arg-type]


def test_the_entrypoint_belongs_to_the_compute_context_and_runs_the_checked_body() -> None:
    assert compute_ctx.is_entrypoint(privsep_rbd.export_to_fifo)
    assert compute_ctx.conf.capabilities == []


def test_a_caller_names_only_the_image_and_the_fifo() -> None:
    """No user, keyring, ceph.conf, base directory or timeout can come from the compute."""
    func = privsep_rbd.export_to_fifo.args[0]  # oslo.privsep wraps it in a partial
    assert func.__name__ == "export_to_fifo"
    assert list(inspect.signature(func).parameters) == [
        "pool", "image", "snapshot", "destination"]


NAMES = ["-x", "--pool=x", ".hidden", "..", "a/b", "a@b", "a b", "a;rm", "a$(id)", "",
         "a\nb", "x" * 256, "é"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("what", ["pool", "image", "snapshot"])
def test_names_outside_cephs_characters_are_refused(base, ceph_files, fifo, what, name):
    _refused(f"{what} .* is not a valid Ceph name", _settings(base, ceph_files),
             **_request(fifo, **{what: name}))


@pytest.mark.parametrize("name", NAMES)
def test_a_configured_user_outside_cephs_characters_is_refused(base, ceph_files, fifo, name):
    _refused("user .* is not a valid Ceph name", _settings(base, ceph_files, user=name),
             **_request(fifo))


def test_destination_outside_base_is_refused(base, ceph_files, tmp_path):
    outside = tmp_path / f".{SHA1}.part-rbd1234"
    os.mkfifo(outside)
    _refused("not a temporary name", _settings(base, ceph_files), **_request(str(outside)))


def test_destination_with_dotdot_is_refused(base, ceph_files, fifo, tmp_path):
    sneaky = str(base / ".." / "_base" / os.path.basename(fifo))
    _refused("not a temporary name", _settings(base, ceph_files), **_request(sneaky))
    _refused("not a temporary name", _settings(base, ceph_files), **_request(str(base / "..")))


def test_destination_symlink_is_refused(base, ceph_files, tmp_path):
    target = tmp_path / "elsewhere"
    os.mkfifo(target)
    link = base / f".{SHA1}.part-link"
    link.symlink_to(target)
    _refused("is not a FIFO", _settings(base, ceph_files), **_request(str(link)))


@pytest.mark.parametrize("name", ["-x", "--path=x", f"-{SHA1}.part-x", "disk", SHA1,
                                  f".{SHA1}.part-", f".{SHA1}.part-a/b"])
def test_destination_with_an_option_like_or_final_name_is_refused(base, ceph_files, name):
    _refused("not a temporary name", _settings(base, ceph_files), **_request(str(base / name)))


def test_relative_destination_is_refused(base, ceph_files, fifo, monkeypatch):
    monkeypatch.chdir(base)
    _refused("not a temporary name", _settings(base, ceph_files),
             **_request(os.path.basename(fifo)))


def test_destination_that_is_a_regular_file_is_refused(base, ceph_files):
    plain = base / f".{SHA1}.part-file"
    plain.write_bytes(b"")
    _refused("is not a FIFO", _settings(base, ceph_files), **_request(str(plain)))


def test_symlinked_base_directory_is_refused(base, ceph_files, tmp_path):
    link = tmp_path / "base-link"
    link.symlink_to(base)
    dest = link / f".{SHA1}.part-rbd1"
    os.mkfifo(dest)
    _refused("not a canonical path", _settings(base, ceph_files, base_dir=str(link)),
             **_request(str(dest)))


@pytest.mark.parametrize("field", ["ceph_conf", "keyring"])
@pytest.mark.parametrize("value", ["-c", "relative.conf", "/nonexistent/ceph.conf", "/tmp"])
def test_configured_ceph_files_must_be_absolute_regular_files(base, ceph_files, fifo, field,
                                                              value):
    _refused("not an absolute path|not a regular file",
             _settings(base, ceph_files, **{field: value}), **_request(fifo))


@pytest.mark.parametrize("field", ["connect_timeout", "osd_op_timeout", "export_timeout"])
@pytest.mark.parametrize("value", [0, -1, True, "5", 10**9, 1.5])
def test_configured_timeouts_must_be_whole_seconds(base, ceph_files, fifo, field, value):
    _refused("not a number of seconds", _settings(base, ceph_files, **{field: value}),
             **_request(fifo))


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
        assert run_export(_settings(base, ceph_files), **_request(fifo)) == 0  # type: ignore[arg-type]
        reader.join(10)
    finally:
        os.close(fd)
    assert out == [b"exported-bytes"]


def test_export_without_a_reader_fails(base, ceph_files, fifo, tmp_path, monkeypatch):
    _fake_rbd(tmp_path, monkeypatch, "printf x")
    _refused("no reader", _settings(base, ceph_files), **_request(fifo))


def test_permission_error_of_rbd_is_named(base, ceph_files, fifo, tmp_path, monkeypatch):
    _fake_rbd(tmp_path, monkeypatch, 'echo "rbd: error opening image img: (1) Operation not '
              'permitted" >&2; exit 1')
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        _refused("^permission denied: rbd export of images/.*@snap exited 1: rbd: error",
                 _settings(base, ceph_files), **_request(fifo))
    finally:
        os.close(fd)


def test_export_over_the_time_limit_is_killed(base, ceph_files, fifo, tmp_path, monkeypatch):
    _fake_rbd(tmp_path, monkeypatch, "sleep 30")
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        _refused("killed after the time limit of 1 s",
                 _settings(base, ceph_files, export_timeout=1), **_request(fifo))
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
            run_export(_settings(base, ceph_files), **_request(fifo))  # type: ignore[arg-type]
    finally:
        os.close(fd)
    assert str(caught.value) == (
        "rbd export of images/8c4f0d5e-1a2b-4c3d-9e8f-7a6b5c4d3e2f@snap exited 110: "
        "rbd: error reading from source image at offset 0: (110) Connection timed out; "
        "rbd: export error: (110) Connection timed out")


def test_destination_replaced_by_a_regular_file_after_the_check_is_refused(
        base, ceph_files, fifo, tmp_path, monkeypatch):
    """The compute owns ``_base``: it may swap the FIFO for a file between check and open."""
    ran = tmp_path / "rbd-ran"
    _fake_rbd(tmp_path, monkeypatch, f'touch {ran}; printf exported-bytes')
    checked = privsep_rbd.check_destination

    def check_then_swap(base_dir: str, value: object) -> str:
        path = checked(base_dir, value)
        os.unlink(path)
        pathlib.Path(path).write_bytes(b"the compute's file")
        return path

    monkeypatch.setattr(privsep_rbd, "check_destination", check_then_swap)
    _refused("is not a FIFO once opened", _settings(base, ceph_files), **_request(fifo))
    assert pathlib.Path(fifo).read_bytes() == b"the compute's file"
    assert not ran.exists()


def test_the_opened_descriptor_must_be_a_fifo(tmp_path: pathlib.Path) -> None:
    plain, pipe = tmp_path / "plain", tmp_path / "pipe"
    plain.write_bytes(b"")
    os.mkfifo(pipe)
    fd = os.open(plain, os.O_WRONLY)
    try:
        with pytest.raises(RbdExportError, match="not a FIFO once opened"):
            check_fifo_fd(str(plain), fd)
    finally:
        os.close(fd)
    fd = os.open(pipe, os.O_RDWR | os.O_NONBLOCK)
    try:
        check_fifo_fd(str(pipe), fd)
    finally:
        os.close(fd)


def _daemon_conf(path: pathlib.Path, text: str) -> cfg.ConfigOpts:
    """A configuration parsed as ``privsep-helper`` parses the global one: its own command
    line options, the files given, no fleetcache option registered."""
    path.write_text(text)
    conf = cfg.ConfigOpts()
    conf.register_cli_opts([cfg.StrOpt("privsep_context"), cfg.StrOpt("privsep_sock_path")])
    conf(args=["--config-file", str(path), "--privsep_context", "x", "--privsep_sock_path", "y"],
         project="privsep", default_config_files=[], default_config_dirs=[])
    return conf


def test_configured_settings_come_from_the_daemons_files(tmp_path: pathlib.Path) -> None:
    conf = _daemon_conf(tmp_path / "compute.conf", f"""
[DEFAULT]
instances_path = {tmp_path}/instances
[image_cache]
subdirectory_name = cache
[glance]
allowed_direct_url_schemes = rbd
rbd_keyring = {tmp_path}/k
rbd_osd_op_timeout = 7
rbd_export_timeout = 99
[libvirt]
rbd_user = nova
images_rbd_ceph_conf = {tmp_path}/ceph.conf
""")
    settings = configured_settings(conf)
    assert settings == ExportSettings(
        rbd=RbdSettings(user="nova", ceph_conf=f"{tmp_path}/ceph.conf", keyring=f"{tmp_path}/k",
                        connect_timeout=5, osd_op_timeout=7, export_timeout=99),
        base_dir=f"{tmp_path}/instances/cache")
    assert configured_settings(conf) == settings  # registering again changes nothing


def test_a_daemon_without_rbd_allowed_refuses_every_export(tmp_path: pathlib.Path) -> None:
    conf = _daemon_conf(tmp_path / "compute.conf", "[glance]\nrbd_user = admin\n")
    with pytest.raises(RbdExportError, match="does not allow direct downloads from rbd"):
        configured_settings(conf)


def _export_through(fifo: str) -> list[bytes]:
    """Call the entrypoint with ``fifo`` open for reading, as the compute has it: what came
    through."""
    out: list[bytes] = []
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        reader = _read_all(f"/proc/self/fd/{fd}", out)
        assert privsep_rbd.export_to_fifo("images", IMAGE, "snap", fifo) == 0
        reader.join(10)
    finally:
        os.close(fd)
    return out


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entrypoints run in this process (as they do inside the daemon) instead of being sent
    to a daemon."""
    monkeypatch.setattr(compute_ctx, "client_mode", False)


def test_the_entrypoint_exports_as_the_daemons_configuration_says(
        base, ceph_files, fifo, tmp_path, monkeypatch, in_process):
    """``export_to_fifo`` as the daemon runs it: ``rbd`` gets the user, files and timeouts
    of the global configuration (the files on the helper's command line)."""
    argv = tmp_path / "argv"
    _fake_rbd(tmp_path, monkeypatch, f'echo "$@" > {argv}; printf exported-bytes')
    conf = _daemon_conf(tmp_path / "compute.conf", f"""
[DEFAULT]
instances_path = {base.parent}
[image_cache]
subdirectory_name = {base.name}
[glance]
enable_rbd_download = true
rbd_user = configured
rbd_ceph_conf = {ceph_files[0]}
rbd_keyring = {ceph_files[1]}
rbd_connect_timeout = 3
rbd_osd_op_timeout = 11
""")
    monkeypatch.setattr(cfg, "CONF", conf)
    assert _export_through(fifo) == [b"exported-bytes"]
    assert argv.read_text().split() == [
        f"--conf={ceph_files[0]}", "--id=configured", f"--keyring={ceph_files[1]}",
        "--client-mount-timeout=3", "--rados-mon-op-timeout=3", "--rados-osd-op-timeout=11",
        "export", "--no-progress", "--pool=images", f"--image={IMAGE}", "--snap=snap",
        "--path=-"]


def test_the_entrypoint_refuses_a_fifo_outside_the_daemons_base(
        base, ceph_files, tmp_path, monkeypatch, in_process):
    """A compute configured with another ``instances_path`` than its daemon is refused."""
    other = tmp_path / "other" / "_base"
    other.mkdir(parents=True)
    fifo = other / f".{SHA1}.part-rbd1"
    os.mkfifo(fifo)
    conf = _daemon_conf(tmp_path / "compute.conf", f"""
[DEFAULT]
instances_path = {base.parent}
[glance]
allowed_direct_url_schemes = rbd
rbd_ceph_conf = {ceph_files[0]}
rbd_keyring = {ceph_files[1]}
""")
    monkeypatch.setattr(cfg, "CONF", conf)
    with pytest.raises(RbdExportError, match=f"directly inside {base}$"):
        privsep_rbd.export_to_fifo("images", IMAGE, "snap", str(fifo))


@pytest.fixture
def real_daemon() -> Iterator[None]:
    """The context's real daemon, started on first use by :func:`privsep.configure`'s helper
    command (the test's configuration files), stopped after the test."""
    yield
    compute_ctx.stop()
    cfg.CONF.clear_override("helper_command", group=privsep.CFG_SECTION)


def test_a_real_daemon_exports_with_the_files_on_its_command_line(
        base, ceph_files, fifo, tmp_path, monkeypatch, real_daemon):
    """The whole chain: the compute's files on ``privsep-helper``'s command line, parsed by
    oslo.privsep into the daemon's global configuration, resolved there; the call itself
    carries the image and the FIFO only."""
    argv, parent = tmp_path / "argv", tmp_path / "parent"
    _fake_rbd(tmp_path, monkeypatch,
              f'echo "$@" > {argv}; echo $PPID > {parent}; printf exported-bytes')
    compute_conf = _daemon_conf(tmp_path / "compute.conf", f"""
[DEFAULT]
instances_path = {base.parent}
[image_cache]
subdirectory_name = {base.name}
[glance]
allowed_direct_url_schemes = rbd
rbd_user = from-the-daemons-file
rbd_ceph_conf = {ceph_files[0]}
rbd_keyring = {ceph_files[1]}
""")
    privsep.configure(compute_conf)
    assert _export_through(fifo) == [b"exported-bytes"]
    assert "--id=from-the-daemons-file" in argv.read_text().split()
    assert int(parent.read_text()) != os.getpid()  # rbd ran in the daemon, not here
