"""Start-up errors through the real console scripts, each in a subprocess, as systemd runs them.

What :mod:`test_start_errors` checks of ``main`` in-process, checked here of the process: its
exit status (2 for the configuration: the units' ``RestartPreventExitStatus=2``) and all it
writes, one line on stderr naming the command, the option or file and the fix, nothing on
stdout, no traceback (oslo.log's excepthook would log one). Every case fails before serving:
the timeout only bounds a regression.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from fleetcache.cmd.common import EXIT_CONFIG

BIN = pathlib.Path(sys.executable).parent
DAEMONS = ["fleetcache-api", "fleetcache-conductor", "fleetcache-compute"]
#: Each script with the arguments after its options (fleetcache-manage: a command).
SCRIPTS: dict[str, list[str]] = {**{d: [] for d in DAEMONS}, "fleetcache-manage": ["db", "version"]}
BAD_PORT = "rabbit://fleetcache:s3cret@broker:notaport/"
UNPARSED = "it does not parse (is every host's port a number, every IPv6 address in [brackets]?)"
URL_FIX = ("give driver://user:password@host:port/virtual_host, e.g. "
           "rabbit://fleetcache:secret@broker:5672/fleetcache")


def run(
    script: str, conf_file: pathlib.Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run ``script`` on ``conf_file``; :returns: its exit status and its one line on stderr."""
    path = BIN / script
    assert path.is_file(), f"{path} is not installed: pip install -e ."
    done = subprocess.run(
        [str(path), "--config-file", str(conf_file), *SCRIPTS.get(script, []), *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
        env=env)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return done.returncode, lines[0]


@pytest.fixture
def conf_file(tmp_path: pathlib.Path) -> pathlib.Path:
    """Where :func:`write` puts the configuration."""
    return tmp_path / "fleetcache.conf"


def write(path: pathlib.Path, script: str, synced_db: str, text: str) -> pathlib.Path:
    """A configuration for ``script`` (a synced database but for the compute, which uses
    none), the ``fake`` transport unless ``text`` says otherwise, plus ``text``."""
    database = "" if script == "fleetcache-compute" else f"[database]\nconnection = {synced_db}\n"
    path.write_text(f"[DEFAULT]\nhost = h1\nstate_path = {path.parent}\ncompute_driver = fake\n"
                    f"{text}\n{database}")
    return path


# --- logging and command-line options, set up before anything else ---------------------------


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_log_file_in_a_missing_directory(
    conf_file: pathlib.Path, synced_db: str, script: str
) -> None:
    log_file = conf_file.parent / "missing" / "x.log"
    code, line = run(script, write(conf_file, script, synced_db, f"log_file = {log_file}"))
    assert code == EXIT_CONFIG
    assert line == (f"{script}: cannot open the log file {log_file} ([DEFAULT] log_file, "
                    "log_dir): No such file or directory; create its directory, let this user "
                    "write there, or set another path")


@pytest.mark.parametrize(("script", "content"), [
    *((s, None) for s in sorted(SCRIPTS)),
    ("fleetcache-conductor", "[loggers]\nkeys = root\n"),
])
def test_log_config_append_that_does_not_load(
    conf_file: pathlib.Path, synced_db: str, script: str, content: str | None
) -> None:
    log_config = conf_file.parent / "logging.conf"
    if content is not None:
        log_config.write_text(content)
    code, line = run(script, write(conf_file, script, synced_db,
                                   f"log_config_append = {log_config}"))
    assert code == EXIT_CONFIG
    assert line.startswith(f"{script}: cannot load the logging configuration {log_config} "
                           "([DEFAULT] log_config_append): ")
    assert line.endswith("; fix the file or unset the option")


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_bad_value_of_a_command_line_option_in_the_file(
    conf_file: pathlib.Path, synced_db: str, script: str
) -> None:
    code, line = run(script, write(conf_file, script, synced_db, "debug = maybe"))
    assert code == EXIT_CONFIG
    assert line == (f"{script}: configuration error: invalid value for option [DEFAULT] debug: "
                    "'maybe' is not a valid Boolean value")


@pytest.mark.parametrize(("script", "destination"), [
    *((s, "use_syslog") for s in sorted(SCRIPTS)),
    ("fleetcache-conductor", "use_journal"),  # the journal handler reads the facility too
])
def test_syslog_facility_that_is_not_one(
    conf_file: pathlib.Path, synced_db: str, script: str, destination: str
) -> None:
    code, line = run(script, write(conf_file, script, synced_db,
                                   f"{destination} = true\nsyslog_log_facility = bogus"))
    assert code == EXIT_CONFIG
    assert line.startswith(f"{script}: invalid value for option [DEFAULT] syslog_log_facility: "
                           "'bogus': syslog facility must be one of: 'LOG_USER', ")
    assert line.endswith("'LOG_LOCAL7'; set one of these (the LOG_ prefix may be left out: "
                         "local0)")


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_journal_without_the_systemd_bindings(
    conf_file: pathlib.Path, synced_db: str, script: str
) -> None:
    code, line = run(script, write(conf_file, script, synced_db, "use_journal = true"),
                     env=_without_systemd_bindings(conf_file.parent))
    assert code == EXIT_CONFIG
    assert line == (f"{script}: cannot log to the systemd journal ([DEFAULT] use_journal): its "
                    "Python bindings (systemd.journal) are not installed; install them (Debian: "
                    "python3-systemd, pip: systemd-python) or set use_journal = false")


def _without_systemd_bindings(directory: pathlib.Path) -> dict[str, str]:
    """An environment in which ``import systemd`` fails as where python3-systemd is not
    installed, whether or not this machine has it: a ``systemd`` package first on the path
    that raises ``ImportError``, which oslo.log's ``handlers`` catches."""
    package = directory / "no-systemd" / "systemd"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("raise ImportError('python3-systemd: not installed')\n")
    path = os.pathsep.join(filter(None, [str(package.parent), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


# --- transport URLs ---------------------------------------------------------------------------


@pytest.mark.parametrize("script", DAEMONS)
@pytest.mark.parametrize(("url", "reason"), [
    (BAD_PORT, UNPARSED),
    # Parses, but the resolver would connect to 99999 modulo 65536.
    ("rabbit://fleetcache:s3cret@broker:99999/", "a host's port is not within 1-65535"),
    # Without confluent_kafka this was a traceback; and the driver has no RPC anyway.
    ("kafka://broker:9092/",
     "kafka:// carries notifications only (oslo.messaging's kafka driver has no RPC)"),
])
def test_transport_url_that_cannot_serve_rpc(
    conf_file: pathlib.Path, synced_db: str, script: str, url: str, reason: str
) -> None:
    code, line = run(script, write(conf_file, script, synced_db, f"transport_url = {url}"))
    assert code == EXIT_CONFIG
    assert line == (f"{script}: invalid value for option [DEFAULT] transport_url: {reason}; "
                    f"{URL_FIX}")


@pytest.mark.parametrize("script", ["fleetcache-api", "fleetcache-conductor"])
def test_notifications_transport_url_with_a_port_that_is_not_a_number(
    conf_file: pathlib.Path, synced_db: str, script: str
) -> None:
    path = write(conf_file, script, synced_db, "transport_url = fake:///\n"
                 f"[oslo_messaging_notifications]\ntransport_url = {BAD_PORT}")
    code, line = run(script, path)
    assert code == EXIT_CONFIG
    assert line == (f"{script}: invalid value for option [oslo_messaging_notifications] "
                    f"transport_url: {UNPARSED}; {URL_FIX}")


def test_manage_cell_create_with_a_port_that_is_not_a_number(
    conf_file: pathlib.Path, synced_db: str
) -> None:
    """A bad ``--transport-url`` is the command's input, not its configuration: status 1, as
    for a URL without a scheme (``tests/unit/cmd/test_manage.py``)."""
    path = write(conf_file, "fleetcache-manage", synced_db, "transport_url = fake:///")
    done = subprocess.run(
        [str(BIN / "fleetcache-manage"), "--config-file", str(path), "cell", "create",
         "--name", "c1", "--transport-url", BAD_PORT],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"ERROR: Invalid input: invalid --transport-url: {UNPARSED}\n"


# --- the conductor's [placement] keystoneauth options -----------------------------------------


@pytest.mark.parametrize(("options", "expected"), [
    ("auth_type = password", "[placement] auth options: auth_type password needs auth_url; "
                             "set them in [placement]"),
    ("auth_type = bogus", "[placement] auth_type: there is no keystoneauth plugin 'bogus'; use "
                          "one of admin_token, "),
    ("auth_type = none\nvalid_interfaces = nonsense",
     "[placement] adapter options: 'nonsense' is not a valid value for valid_interfaces"),
])
def test_conductor_with_unusable_placement_auth_options(
    conf_file: pathlib.Path, synced_db: str, options: str, expected: str
) -> None:
    script = "fleetcache-conductor"
    path = write(conf_file, script, synced_db, f"transport_url = fake:///\n[placement]\n{options}")
    code, line = run(script, path)
    assert code == EXIT_CONFIG
    assert line.startswith(f"{script}: Invalid configuration: {expected}")
