"""Every command turns a configuration or environment problem into one line and an exit status.

Each case runs a command's ``main`` as its console script does, with a configuration file
holding the problem, and checks the exit status and that stderr is exactly one line, naming
the command, the problem and the fix (never a traceback).
"""

from __future__ import annotations

import os
import pathlib
import socket
from collections.abc import Callable, Iterator

import pytest
from oslo_config import cfg

from fleetcache.cmd import api, client, common, compute, conductor, manage

Main = Callable[[list[str]], int]

MAINS: dict[str, Main] = {
    "fleetcache-api": lambda argv: api.main(argv),
    "fleetcache-conductor": lambda argv: conductor.main(argv, cfg.ConfigOpts()),
    "fleetcache-compute": lambda argv: compute.main(argv, cfg.ConfigOpts()),
    "fleetcache-manage": lambda argv: manage.main([*argv, "db", "version"], cfg.ConfigOpts()),
}
#: Nothing listens there (port 1 is tcpmux, never run).
NO_BROKER = "rabbit://guest:guest@127.0.0.1:1/"


def run(prog: str, conf_file: pathlib.Path, capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run ``prog`` on ``conf_file``; :returns: the exit status and the one line on stderr
    (oslo.log writes to stdout: nothing there either)."""
    try:
        code = MAINS[prog](["--config-file", str(conf_file)])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capfd.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{prog}: "), err
    return code, lines[0]


def write(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    path = tmp_path / "fleetcache.conf"
    path.write_text(f"[DEFAULT]\nhost = h1\nstate_path = {tmp_path}\n{text}")
    return path


# --- the configuration files, for every daemon and fleetcache-manage -------------------------


@pytest.mark.parametrize("prog", sorted(MAINS))
def test_config_file_that_is_a_directory(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str], prog: str
) -> None:
    code, line = run(prog, tmp_path, capfd)
    assert code == common.EXIT_CONFIG
    assert line.endswith(f"cannot read the configuration file {tmp_path}: Is a directory; "
                         "give a readable file (--config-file)")


@pytest.mark.parametrize("prog", sorted(MAINS))
def test_config_file_that_is_not_text(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str], prog: str
) -> None:
    path = tmp_path / "fleetcache.conf"
    path.write_bytes(b"\xff\xfe[DEFAULT]\n")
    code, line = run(prog, path, capfd)
    assert code == common.EXIT_CONFIG
    assert f"the configuration file {path} is not UTF-8 text" in line
    assert "give an oslo.config INI file" in line


@pytest.mark.parametrize("prog", sorted(MAINS))
def test_config_file_with_bad_syntax(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str], prog: str
) -> None:
    path = tmp_path / "fleetcache.conf"
    path.write_text("[DEFAULT\nhost = h1\n")
    code, line = run(prog, path, capfd)
    assert code == common.EXIT_CONFIG
    assert f"Failed to parse {path}" in line and "Invalid section" in line


def test_unreadable_config_file_is_named(tmp_path: pathlib.Path) -> None:
    """As a user who may not read it (root reads everything: the message itself is tested)."""
    path = tmp_path / "fleetcache.conf"
    path.write_text("[DEFAULT]\n")
    path.chmod(0)
    error = PermissionError(13, "Permission denied", str(path))
    if os.geteuid() == 0:
        message = common.unreadable_config(["--config-file", str(tmp_path)], "x", error)
        assert message.startswith(f"cannot read the configuration file {tmp_path}:")
    else:
        message = common.unreadable_config(["--config-file", str(path)], "x", error)
        assert message == (f"cannot read the configuration file {path}: Permission denied; "
                           "give a readable file (--config-file)")


# --- the database -----------------------------------------------------------------------------


@pytest.mark.parametrize("prog", ["fleetcache-api", "fleetcache-conductor", "fleetcache-manage"])
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("garbage", "invalid value for option [database] connection: Could not parse "
                    "SQLAlchemy URL from given URL string; give a SQLAlchemy URL"),
        ("nosuch://h/db", "invalid value for option [database] connection: Can't load plugin: "
                          "sqlalchemy.dialects:nosuch; give a SQLAlchemy URL"),
        ("mssql+pyodbc://u:secret@h/db",
         "invalid value for option [database] connection mssql+pyodbc://u:***@h/db: its driver "
         "is not installed (No module named 'pyodbc'); install it, or name an installed one"),
    ],
)
def test_unusable_database_url(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str], prog: str, url: str,
    expected: str,
) -> None:
    code, line = run(prog, write(tmp_path, f"[database]\nconnection = {url}\n"), capfd)
    assert code == common.EXIT_CONFIG
    assert expected in line
    assert "secret" not in line


@pytest.mark.parametrize("prog", ["fleetcache-api", "fleetcache-conductor", "fleetcache-manage"])
def test_database_down(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str], prog: str
) -> None:
    url = "postgresql+psycopg2://u:secret@127.0.0.1:1/db"
    code, line = run(prog, write(tmp_path, f"[database]\nconnection = {url}\n"), capfd)
    assert code == 1
    assert line.startswith(f"{prog}: cannot use the database "
                           "postgresql+psycopg2://u:***@127.0.0.1:1/db: ")
    assert "Connection refused" in line
    assert line.endswith("; check [database] connection and that the server is up")


@pytest.mark.parametrize("prog", ["fleetcache-api", "fleetcache-conductor"])
def test_database_not_synced(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str], prog: str
) -> None:
    url = f"sqlite:///{tmp_path}/empty.sqlite"
    code, line = run(prog, write(tmp_path, f"[database]\nconnection = {url}\n"), capfd)
    assert code == 1
    assert line.endswith("run 'fleetcache-manage db sync'")


# --- the broker -------------------------------------------------------------------------------


@pytest.mark.parametrize("prog", ["fleetcache-api", "fleetcache-conductor", "fleetcache-compute"])
@pytest.mark.parametrize("url", ["nosuch://h/", "no-scheme", "rabbit://u:p@h:notaport/"])
def test_unusable_transport_url(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str], synced_db: str, prog: str,
    url: str,
) -> None:
    database = "" if prog == "fleetcache-compute" else f"[database]\nconnection = {synced_db}\n"
    path = write(tmp_path, f"transport_url = {url}\ncompute_driver = fake\n{database}")
    code, line = run(prog, path, capfd)
    assert code == common.EXIT_CONFIG
    assert line.startswith(f"{prog}: invalid value for option [DEFAULT] transport_url: ")


# --- the compute's host -----------------------------------------------------------------------


@pytest.fixture
def path_without_qemu_img(tmp_path: pathlib.Path) -> Iterator[None]:
    """``PATH``: one directory linking ``cp`` and ``prlimit`` only."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("cp", "prlimit"):
        for directory in os.environ["PATH"].split(os.pathsep):
            if os.path.exists(os.path.join(directory, tool)):
                (bin_dir / tool).symlink_to(os.path.join(directory, tool))
                break
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", str(bin_dir))
        yield


def _local_compute(tmp_path: pathlib.Path, extra: str = "") -> pathlib.Path:
    (tmp_path / "images").mkdir()
    return write(tmp_path, f"transport_url = {NO_BROKER}\n{extra}"
                 f"[image_source]\nbackend = local\nlocal_directory = {tmp_path}/images\n")


@pytest.mark.usefixtures("path_without_qemu_img")
def test_compute_without_qemu_img(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str]
) -> None:
    code, line = run("fleetcache-compute", _local_compute(tmp_path), capfd)
    assert code == common.EXIT_CONFIG
    assert ("[libvirt] images_type: backend qcow2 needs qemu-img, not found on this host: "
            "install qemu-utils") in line


@pytest.mark.parametrize("where", ["a-file", "missing/dir"])
def test_compute_with_unusable_instances_path(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str], where: str
) -> None:
    (tmp_path / "a-file").write_text("")
    path = _local_compute(tmp_path, f"instances_path = {tmp_path}/{where}\n")
    if where == "missing/dir":
        (tmp_path / "missing").write_text("")  # so that the directory cannot be created
    code, line = run("fleetcache-compute", path, capfd)
    assert code == common.EXIT_CONFIG
    assert f"[DEFAULT] instances_path '{tmp_path}/{where}' is not usable on host h1" in line
    assert line.endswith("make it a directory this user can write, or set another path")


# --- the API's listening address and policy ---------------------------------------------------


def test_api_port_in_use(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str], synced_db: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = write(tmp_path, f"transport_url = {NO_BROKER}\n[database]\nconnection = "
                     f"{synced_db}\n[api]\nbind_host = 127.0.0.1\nbind_port = {port}\n")
        code, line = run("fleetcache-api", path, capfd)
    assert code == common.EXIT_CONFIG
    assert line == (f"fleetcache-api: cannot listen on 127.0.0.1:{port} ([api] bind_host, "
                    "bind_port): Address already in use; stop what listens there or choose "
                    "another address")


@pytest.mark.parametrize(("policy", "error"), [
    ("a: [\n", "ValueError"),
    ("- a list\n", "AttributeError"),
])
def test_api_policy_file_that_does_not_load(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str], synced_db: str, policy: str,
    error: str,
) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(policy)
    path = write(tmp_path, f"transport_url = {NO_BROKER}\n[database]\nconnection = "
                 f"{synced_db}\n[oslo_policy]\npolicy_file = {policy_file}\n")
    code, line = run("fleetcache-api", path, capfd)
    assert code == common.EXIT_CONFIG
    assert line.startswith(f"fleetcache-api: cannot load the policy file {policy_file} "
                           f"([oslo_policy] policy_file): {error}: ")
    assert line.endswith("fix or remove it (etc/fleetcache/policy.yaml.sample shows the format)")


@pytest.mark.parametrize(("oslo_limit", "wanted"), [
    ("", "[oslo_limit] auth_type is not set: give the service user"),
    ("auth_type = nosuch\n", "[oslo_limit] auth_type 'nosuch' is not a keystoneauth plugin"),
    ("auth_type = password\n", "[oslo_limit] names no endpoint whose limits apply"),
])
def test_api_with_unified_limits_and_no_oslo_limit(
    tmp_path: pathlib.Path, capfd: pytest.CaptureFixture[str], synced_db: str,
    oslo_limit: str, wanted: str,
) -> None:
    path = write(tmp_path, f"transport_url = {NO_BROKER}\n[database]\nconnection = "
                 f"{synced_db}\n[api]\nbind_host = 127.0.0.1\nbind_port = 0\n"
                 f"[oslo_limit]\n{oslo_limit}")
    code, line = run("fleetcache-api", path, capfd)
    assert code == common.EXIT_CONFIG
    assert line.startswith(f"fleetcache-api: {wanted}")
    assert line.endswith("([quota] driver = unified_limits; driver = noop for no quota)")


# --- fleetcache, the API's client -------------------------------------------------------------


def test_client_with_an_api_that_does_not_answer(capfd: pytest.CaptureFixture[str]) -> None:
    code = client.main(["--os-endpoint", "http://127.0.0.1:1", "jobs", "list", "agg"])
    err = capfd.readouterr().err
    assert code == 1
    assert len(err.splitlines()) == 1
    assert err.startswith("fleetcache: cannot reach the API at http://127.0.0.1:1/v2.1/")
    assert err.rstrip().endswith(
        "check --os-endpoint (or OS_ENDPOINT) and that fleetcache-api runs there")
