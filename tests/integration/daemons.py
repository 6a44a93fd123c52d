"""Real ``fleetcache-conductor`` and ``fleetcache-compute`` processes for integration tests.

A :class:`Deployment` writes one configuration file per daemon in a temporary directory,
syncs a SQLite database with ``fleetcache-manage``, starts daemons as real processes (their
output in ``<name>.log`` beside the config) and answers "is this service up" from the
database the conductor writes. A daemon that exits while it should run fails the test with its
log, never a skip.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from oslo_config import cfg

from fleetcache.common import config, rpc, servicegroup
from fleetcache.common.db import services as db_services
from fleetcache.common.db.services import ServiceDict
from fleetcache.common.db.session import Database

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(os.environ.get("FLEETCACHE_VENV", ROOT / ".venv")) / "bin"
COMPUTE = "fleetcache-compute"
CONDUCTOR = "fleetcache-conductor"


@contextlib.contextmanager
def machine_lock(name: str, timeout: float = 900) -> Iterator[None]:
    """Hold ``/tmp/<name>.lock`` so that two test runs on this machine do not share a vhost or
    a RabbitMQ node at the same time (a conductor of one run would answer the other's
    computes)."""
    with open(f"/tmp/{name}.lock", "w") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"another test run held /tmp/{name}.lock for "
                                         f"{timeout:.0f} s") from None
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def second_conductor_conf(host: str) -> str:
    """The options that make a second ``fleetcache-conductor`` on the stack's configuration a
    process of its own: its host name, and a free port for its Prometheus exporter (the
    stack's conductor holds the stack's port)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"[DEFAULT]\nhost = {host}\n[metrics]\nconductor_port = {port}\n"


def _rabbitmqctl(*args: str) -> None:
    result = subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, text=True,
                            timeout=60)
    if result.returncode != 0 and "already exists" not in result.stderr + result.stdout:
        raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed: {result.stderr}{result.stdout}")


@contextlib.contextmanager
def private_vhost(vhost: str) -> Iterator[str]:
    """A vhost of the machine's broker for one test module, held under a machine-wide lock
    so that two runs on this machine never share it."""
    with machine_lock(vhost.strip("/")):
        _rabbitmqctl("add_vhost", vhost)
        _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        yield vhost


class Daemon:
    """One daemon process with its own config file and log."""

    def __init__(self, name: str, binary: str, conf_file: Path) -> None:
        self.name = name
        self.binary = binary
        self.conf_file = conf_file
        self.log_file = conf_file.with_suffix(".log")
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        self._log = open(self.log_file, "ab")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            [str(VENV_BIN / self.binary), "--config-file", str(self.conf_file)],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def log(self, lines: int = 60) -> str:
        text = self.log_file.read_text(errors="replace") if self.log_file.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def assert_running(self) -> None:
        if self.proc is None:
            raise AssertionError(f"{self.name} was never started")
        code = self.proc.poll()
        if code is not None:
            raise AssertionError(f"{self.name} ({self.binary}) exited with status {code}; "
                                 f"last lines of {self.log_file}:\n{self.log()}")

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        """Wait for the process to end; :returns: its exit status."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM and wait. :returns: the exit status (SIGKILL after ``timeout``: -9)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.signal(signal.SIGTERM)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            self.signal(signal.SIGKILL)
            self.wait(10)
            raise AssertionError(
                f"{self.name} ignored SIGTERM for {timeout} s:\n{self.log()}") from exc


class Deployment:
    """A conductor and computes sharing one transport URL and one SQLite database."""

    def __init__(self, workdir: Path, transport_url: str, report_interval: int = 1,
                 service_down_time: int = 5, extra: str = "", db_url: str | None = None) -> None:
        self.workdir = workdir
        self.transport_url = transport_url
        self.report_interval = report_interval
        self.service_down_time = service_down_time
        self.extra = extra
        self.db_url = db_url or f"sqlite:///{workdir}/fleetcache.sqlite"
        self.daemons: list[Daemon] = []
        self.conductor_conf = self._write_conf("conductor", "fctest-conductor")
        self.manage("db", "sync")
        self.db = Database(self.db_url)

    def _write_conf(self, name: str, host: str, database: bool = True,
                    transport_url: str | None = None) -> Path:
        path = self.workdir / f"{name}.conf"
        lines = [
            "[DEFAULT]",
            f"host = {host}",
            f"transport_url = {transport_url or self.transport_url}",
            f"state_path = {self.workdir}",
            f"report_interval = {self.report_interval}",
            f"service_down_time = {self.service_down_time}",
            "rpc_response_timeout = 5",
            "compute_driver = fake",
            "debug = true",
            "[conductor]",
            "cell_refresh_interval = 5",
        ]
        if database:  # a compute holds no database credentials
            lines += ["[database]", f"connection = {self.db_url}"]
        path.write_text("\n".join(lines) + "\n" + self.extra)
        return path

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [str(VENV_BIN / "fleetcache-manage"), "--config-file", str(self.conductor_conf),
             *args], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise AssertionError(f"fleetcache-manage {' '.join(args)} failed "
                                 f"({result.returncode}):\n{result.stdout}{result.stderr}")
        return result.stdout

    def start_conductor(self, host: str | None = None) -> Daemon:
        """Start the conductor, or another one on ``host`` (same topic, database, broker)."""
        if host is None:
            return self._start(Daemon("conductor", CONDUCTOR, self.conductor_conf))
        return self._start(Daemon(host, CONDUCTOR, self._write_conf(host, host)))

    def start_compute(self, host: str, transport_url: str | None = None) -> Daemon:
        """Start compute ``host`` on ``transport_url`` (its cell's; default the deployment's),
        or again on the configuration it was first started with."""
        conf = self.workdir / f"{host}.conf"
        if not conf.exists():
            conf = self._write_conf(host, host, database=False, transport_url=transport_url)
        return self._start(Daemon(host, COMPUTE, conf))

    def _start(self, daemon: Daemon) -> Daemon:
        daemon.start()
        self.daemons.append(daemon)
        return daemon

    def service(self, host: str, binary: str = COMPUTE) -> ServiceDict | None:
        found = db_services.service_list(self.db, binary=binary, hosts=[host])
        return found[0] if found else None

    def is_up(self, host: str, binary: str = COMPUTE) -> bool:
        svc = self.service(host, binary)
        return svc is not None and servicegroup.service_is_up(svc, self.service_down_time)

    def check_running(self) -> None:
        for daemon in self.daemons:
            if daemon.proc is not None and daemon.proc.returncode is None:
                daemon.assert_running()

    def close(self) -> None:
        """Stop whatever still runs (SIGKILL if it must) and close the database."""
        for daemon in reversed(self.daemons):
            if daemon.proc is not None and daemon.proc.poll() is None:
                daemon.signal(signal.SIGKILL)
                daemon.wait(10)
        self.db.dispose()


def conductor_client(url: str) -> tuple[rpc.Transports, Any]:
    """An RPC client of the conductors on ``url`` (60 s calls), and its transports to clean
    up after."""
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    rpc.register_opts(conf)
    conf([], project="fleetcache", default_config_files=[])
    conf.set_override("rpc_response_timeout", 60)
    transports = rpc.Transports(conf)
    return transports, rpc.get_client(transports.get(url), "conductor")
