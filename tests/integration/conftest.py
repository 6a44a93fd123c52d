"""Fixtures of the integration tests: the real local stack of ``tools/stack.sh``.

The stack (real Keystone 30 and Glance 33, ``fleetcache-api`` under gunicorn behind Keystone, a
conductor and three computes in two cells on the machine's RabbitMQ) is started outside pytest,
by ``tools/run-integration.sh`` or by hand::

    tools/stack.sh up && .venv/bin/pytest -m integration tests/integration; tools/stack.sh down

The ``stack`` fixture reads ``.stack/env`` (or ``$FLEETCACHE_STACK_DIR/env``) and fails loudly
when the stack is not up. Use it like::

    def test_x(stack):
        agg = stack.openstack_json("aggregate", "create", "a1")
        assert db_aggregates.aggregate_get(stack.db, agg["id"])["name"] == "a1"
        with stack.compute_stopped("compute2"):
            stack.wait_service_state("compute2", up=False)

Every request carries a real Keystone token: :meth:`Stack.api_request` and
:meth:`Stack.run_openstack` act as one of the stack's users (``admin``, ``member`` and ``reader``
of project fleetcache-demo, ``other``: member of fleetcache-other), :attr:`Stack.glance` is a
``requests`` session with the admin's token.

Every test in this directory is marked ``integration``.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from keystoneauth1 import session as ks_session
from oslo_config import cfg

from fleetcache.common import servicegroup
from fleetcache.common.config import database as database_opts
from fleetcache.common.config import default as default_opts
from fleetcache.common.db import models
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from tests.integration.ceph_cluster import CephCluster
from tests.integration.glance_log import GlanceRequest
from tests.integration.identity import USERS, TokenSession, password_auth, read_env_file

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(os.environ.get("FLEETCACHE_VENV", ROOT / ".venv")) / "bin"
STACK_SH = ROOT / "tools" / "stack.sh"
COMPUTE_BINARY = "fleetcache-compute"
CLI_TIMEOUT = 120


#: Test modules that run after all the others (they inspect what the whole run left behind).
LAST = ("test_secrets_in_logs.py",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
    items.sort(key=lambda item: Path(str(item.fspath)).name in LAST)  # stable: order kept


class Stack:
    """The running local stack, as ``tools/stack.sh up`` described it in ``.stack/env``.

    :ivar env: the stack's variables (``OS_*``, ``FLEETCACHE_*``) only.
    :ivar computes: compute host name -> its ``instances_path``.
    :ivar sample_images: the Glance ids of the sample images (qcow2 first, then raw).
    :ivar conf_file: the API's and conductor's configuration file.
    :ivar conductor_conf_file: what the conductor alone reads after :attr:`conf_file` (its
        Glance service user); see :meth:`conductor_args`.
    :ivar api_url: the compute API endpoint (``.../v2.1``), as in the catalog.
    :ivar api_backend_url: the same served by ``fleetcache-api`` itself, without the nginx
        front that the catalog's endpoint is (``etc/nginx/fleetcache-api.conf``).
    :ivar glance_url: the Glance root URL, as in the catalog.
    :ivar users: user (``admin``, ``member``, ``reader``, ``other``) -> the ``OS_*`` variables
        of its env file.
    :ivar admin_http: a ``requests`` session with the admin's token, for raw calls to Glance
        and Placement (both behind the stack's Keystone).
    :ivar glance: the same session, named for raw Glance calls.
    :ivar glance_access_log: Glance's access log (see :meth:`glance_requests`).
    :ivar ceph: the stack's throwaway Ceph cluster (``tools/ceph.sh``).
    :ivar rbd_sample_image: the Glance id of the raw sample image in Glance's rbd store.
    :ivar placement_env: ``.stack/placement-env``: what makes the unmodified ``openstack
        resource provider ...`` commands (osc-placement) talk to the stack's Placement.
    """

    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        self.dir = directory
        self.env = env
        self.conf_file = Path(env["FLEETCACHE_CONF"])
        self.conductor_conf_file = Path(env["FLEETCACHE_CONDUCTOR_CONF"])
        self.api_url = env["FLEETCACHE_API_URL"].rstrip("/")
        self.api_backend_url = env["FLEETCACHE_API_BACKEND_URL"].rstrip("/")
        self.glance_url = env["FLEETCACHE_GLANCE_URL"].rstrip("/")
        self.users = {
            user: {k: v for k, v in read_env_file(directory / name).items()
                   if k.startswith("OS_")}
            for user, name in USERS.items()}
        self._sessions: dict[str, ks_session.Session] = {}
        self.admin_http = TokenSession(self.keystone_session("admin"))
        self.glance = self.admin_http
        self.computes = {
            host: Path(path)
            for host, _, path in (p.partition(":") for p in env["FLEETCACHE_COMPUTES"].split())
        }
        self.sample_images = env["FLEETCACHE_SAMPLE_IMAGES"].split()
        self.glance_access_log = Path(env.get("FLEETCACHE_GLANCE_ACCESS_LOG",
                                              directory / "log" / "glance-access.log"))
        self.ceph = CephCluster(
            conf=Path(env["FLEETCACHE_CEPH_CONF"]), fsid=env["FLEETCACHE_CEPH_FSID"],
            keyrings={user: Path(env[f"FLEETCACHE_CEPH_KEYRING_{user.upper()}"])
                      for user in CephCluster.USERS})
        self.rbd_sample_image = env["FLEETCACHE_RBD_SAMPLE_IMAGE"]
        self.placement_env = read_env_file(directory / "placement-env")
        self.conf = _load_conf(self.conf_file)
        self._db: Database | None = None

    # -- configuration and database ----------------------------------------------------------

    @property
    def service_down_time(self) -> int:
        return int(self.conf.service_down_time)

    @property
    def report_interval(self) -> int:
        return int(self.conf.report_interval)

    def conductor_args(self) -> list[str]:
        """The ``--config-file`` arguments of the stack's conductor, for another conductor
        process on the stack's configuration."""
        return ["--config-file", str(self.conf_file),
                "--config-file", str(self.conductor_conf_file)]

    def compute_conf_file(self, host: str) -> Path:
        return self.dir / "etc" / f"{host}.conf"

    def log_file(self, name: str) -> Path:
        """The log of daemon ``name`` (``conductor``, ``compute1``...)."""
        return self.dir / "log" / f"{name}.log"

    def glance_requests(self) -> list[GlanceRequest]:
        """Every request Glance has answered so far, oldest first (from its access log)."""
        return [GlanceRequest.parse(line)
                for line in self.glance_access_log.read_text().splitlines() if line.strip()]

    @property
    def db(self) -> Database:
        """The stack's database (the one the API and conductor use)."""
        if self._db is None:
            self._db = Database(self.conf.database.connection)
        return self._db

    def close(self) -> None:
        self.glance.close()
        if self._db is not None:
            self._db.dispose()
            self._db = None

    # -- identity -----------------------------------------------------------------------------

    def keystone_session(self, user: str = "admin") -> ks_session.Session:
        """A keystoneauth session of ``user`` (password auth, project-scoped), kept for the
        run: it authenticates once and again only when its token nears expiry."""
        if user not in self._sessions:
            self._sessions[user] = ks_session.Session(auth=password_auth(self.users[user]),
                                                      timeout=30)
        return self._sessions[user]

    def token(self, user: str = "admin") -> str:
        """A valid token of ``user`` (the same one while it lasts)."""
        token = self.keystone_session(user).get_token()
        assert token, f"Keystone gave no token for {user}"
        return str(token)

    def new_token(self, user: str = "admin") -> str:
        """A fresh token of ``user``, nobody else's (for tests that revoke it)."""
        token = ks_session.Session(auth=password_auth(self.users[user])).get_token()
        assert token, f"Keystone gave no token for {user}"
        return str(token)

    def passwords(self) -> dict[str, str]:
        """Every password of the stack (``etc/passwords``: ``ADMIN_PASSWORD``...)."""
        lines = (self.dir / "etc" / "passwords").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def glance_auth_options(self) -> dict[str, Any]:
        """``[glance]`` options (``make_conf`` keywords) that authenticate to Glance as the
        stack's service user ``fleetcache``, as the computes do."""
        return {"glance__auth_type": "password",
                "glance__auth_url": self.users["admin"]["OS_AUTH_URL"],
                "glance__username": "fleetcache",
                "glance__password": self.passwords()["FLEETCACHE_SERVICE_PASSWORD"],
                "glance__project_name": "service",
                "glance__user_domain_name": "Default",
                "glance__project_domain_name": "Default"}

    # -- clients ------------------------------------------------------------------------------

    def process_env(self, user: str = "admin") -> dict[str, str]:
        """``os.environ`` without its ``OS_*``, with the stack's variables and ``user``'s
        ``OS_*`` (password auth, the catalog), for a client subprocess."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
        return {**env, **self.env, **self.users[user]}

    def run_openstack(self, *args: str, check: bool = True, placement: bool = False,
                      user: str = "admin") -> subprocess.CompletedProcess[str]:
        """Run the real ``openstack`` client of the venv against the stack as ``user``.

        :param placement: with :attr:`placement_env` (for osc-placement's commands).
        :raises AssertionError: when ``check`` and the command exits non-zero (with its output).
        """
        cmd = [str(VENV_BIN / "openstack"), *args]
        env = {**self.process_env(user), **(self.placement_env if placement else {})}
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=CLI_TIMEOUT, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{shlex.join(['openstack', *args])} exited {proc.returncode}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
        return proc

    def openstack_json(self, *args: str, placement: bool = False, user: str = "admin") -> Any:
        """``run_openstack(*args, "-f", "json")`` and the parsed output."""
        return json.loads(self.run_openstack(*args, "-f", "json", placement=placement,
                                             user=user).stdout)

    def api_request(self, method: str, path: str, *, user: str | None = "admin",
                    token: str | None = None, microversion: str | None = None,
                    **kwargs: Any) -> requests.Response:
        """A raw HTTP request to the API (``path`` relative to ``api_url``) with ``user``'s
        token (``token``: this one instead); ``user=None`` and no ``token``: no token."""
        headers = dict(kwargs.pop("headers", {}))
        if token is None and user is not None:
            token = self.token(user)
        if token is not None:
            headers["X-Auth-Token"] = token
        if microversion is not None:
            headers["OpenStack-API-Version"] = f"compute {microversion}"
        return requests.request(method, f"{self.api_url}/{path.lstrip('/')}", headers=headers,
                                timeout=30, **kwargs)

    def purge_aggregate(self, aggregate_id: int) -> None:
        """Remove every host of an aggregate, then delete it (through the API); idempotent."""
        resp = self.api_request("GET", f"os-aggregates/{aggregate_id}")
        if resp.status_code == 404:
            return
        resp.raise_for_status()
        for host in resp.json()["aggregate"]["hosts"]:
            self.api_request("POST", f"os-aggregates/{aggregate_id}/action",
                             json={"remove_host": {"host": host}}).raise_for_status()
        self.api_request("DELETE", f"os-aggregates/{aggregate_id}").raise_for_status()

    # -- daemons ------------------------------------------------------------------------------

    def stop_service(self, name: str, kill: bool = False) -> None:
        """Stop one daemon of the stack (``compute2``, ``conductor``...); ``kill``: SIGKILL."""
        self._stack_sh("stop", name, *(["--kill"] if kill else []))

    def start_service(self, name: str) -> None:
        """Start a stopped daemon again with the command and config ``up`` gave it."""
        self._stack_sh("start", name)

    def service(self, host: str, binary: str = COMPUTE_BINARY) -> db_services.ServiceDict:
        return db_services.service_get(self.db, host, binary)

    def service_is_up(self, host: str, binary: str = COMPUTE_BINARY) -> bool:
        return servicegroup.service_is_up(self.service(host, binary), self.service_down_time)

    def wait_service_state(self, host: str, up: bool, binary: str = COMPUTE_BINARY,
                           timeout: float | None = None) -> float:
        """Wait until ``host`` is reported up (or down). :returns: the seconds it took."""
        limit = timeout if timeout is not None else self.service_down_time * 2 + 10
        start = time.monotonic()
        while self.service_is_up(host, binary) != up:
            if time.monotonic() - start > limit:
                raise AssertionError(f"{binary} on {host} not {'up' if up else 'down'} "
                                     f"after {limit}s: {self.service(host, binary)}")
            time.sleep(0.5)
        return time.monotonic() - start

    @contextlib.contextmanager
    def compute_stopped(self, host: str, kill: bool = True) -> Iterator[None]:
        """Stop compute ``host`` for the block, then start it and wait until it is up again."""
        self.stop_service(host, kill=kill)
        try:
            yield
        finally:
            self.start_service(host)
            self.wait_service_state(host, up=True)

    @contextlib.contextmanager
    def conductor_options(self, name: str, text: str) -> Iterator[None]:
        """Run the block with a conductor restarted on ``etc/conductor.d/<name>.conf``
        (``text``: ini lines); the file is removed and the conductor restarted after."""
        override = self.dir / "etc" / "conductor.d" / f"{name}.conf"
        override.write_text(text)
        try:
            self.restart_conductor()
            yield
        finally:
            override.unlink(missing_ok=True)
            self.restart_conductor()

    @contextlib.contextmanager
    def compute_options(self, host: str, name: str, text: str) -> Iterator[None]:
        """Run the block with compute ``host`` restarted on ``etc/<host>.d/<name>.conf``
        (``text``: ini lines); the file is removed and the compute restarted after."""
        override = self.dir / "etc" / f"{host}.d" / f"{name}.conf"
        override.write_text(text)
        try:
            self.restart_compute(host)
            yield
        finally:
            override.unlink(missing_ok=True)
            self.restart_compute(host)

    def restart_compute(self, host: str, timeout: float = 60) -> None:
        """Stop compute ``host``, start it again and wait until the new process reported
        (its ``report_count`` grew: registration and heartbeats bump it)."""
        self.stop_service(host)
        before = self.service(host)["report_count"]
        self.start_service(host)
        deadline = time.monotonic() + timeout
        while self.service(host)["report_count"] <= before:
            if time.monotonic() > deadline:
                raise AssertionError(f"compute {host} did not report within {timeout}s after "
                                     f"its restart; see {self.log_file(host)}")
            time.sleep(0.3)
        self.wait_service_state(host, up=True)

    def restart_conductor(self, timeout: float = 60) -> None:
        """Stop the conductor, start it again, and wait until it registered and every
        compute's heartbeat reached it.

        "Every compute is up" would not do: a restart leaves the conductor deaf for about
        as long as ``service_down_time`` or longer (4.5-13.5 s from SIGTERM to serving again,
        measured on the 2-vCPU test machine under other runs' load; 10 s here), so right
        after it a compute can still count as up on its last heartbeat before the restart,
        then turn down until its next one is stored: a pre-cache job started then skips it.
        """
        self.stop_service("conductor")
        self.start_service("conductor")
        pid = (self.dir / "run" / "conductor.pid").read_text().split()[0]
        deadline = time.monotonic() + timeout
        mark = re.compile(rf"^\S+ \S+ {pid} .*fleetcache-conductor on \S+: registered")
        log = self.log_file("conductor")
        while not any(mark.match(line) for line in log.read_text().splitlines()):
            if time.monotonic() > deadline:
                raise AssertionError(f"the conductor (pid {pid}) did not register within "
                                     f"{timeout}s; see {log}")
            time.sleep(0.2)
        serving = models.utcnow()  # the conductor registers once its RPC servers listen
        for host in self.computes:
            self.wait_heartbeat_since(host, serving)

    def wait_heartbeat_since(self, host: str, since: datetime.datetime,
                             binary: str = COMPUTE_BINARY) -> None:
        """Wait until ``host`` stored a heartbeat after ``since`` (then it is up for at
        least ``service_down_time``, heartbeats going on)."""
        limit = self.service_down_time * 2 + 10
        deadline = time.monotonic() + limit
        while not ((seen := self.service(host, binary)["last_seen_up"]) and seen > since):
            if time.monotonic() > deadline:
                raise AssertionError(f"{binary} on {host}: no heartbeat since {since} within "
                                     f"{limit}s: {self.service(host, binary)}")
            time.sleep(0.3)

    def _stack_sh(self, *args: str) -> None:
        proc = subprocess.run([str(STACK_SH), *args], capture_output=True, text=True,
                              env={**os.environ, "FLEETCACHE_STACK_DIR": str(self.dir)},
                              timeout=60, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"tools/stack.sh {' '.join(args)} failed: "
                                 f"{proc.stdout}{proc.stderr}")


def _load_conf(path: Path) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    default_opts.register_opts(conf)
    database_opts.register_opts(conf)
    conf(args=[], project="fleetcache", default_config_files=[str(path)])
    return conf


def _answers(url: str) -> bool:
    try:
        requests.get(url, timeout=5)
    except requests.RequestException:
        return False
    return True


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    """The running local stack; fails (never skips) when it is not up."""
    directory = Path(os.environ.get("FLEETCACHE_STACK_DIR", ROOT / ".stack"))
    env_file = directory / "env"
    if not env_file.is_file():
        pytest.fail(f"the local stack is not up: {env_file} is missing. Start it with "
                    "tools/stack.sh up, or run tools/run-integration.sh", pytrace=False)
    result = Stack(directory, read_env_file(env_file))
    for name, url in (("Glance", result.glance_url + "/"), ("API", result.api_url + "/")):
        if not _answers(url):
            pytest.fail(f"the local stack is not up: {name} at {url} does not answer "
                        f"(see {directory}/log, or tools/stack.sh status)", pytrace=False)
    yield result
    result.close()


class AggregateFactory:
    """Creates aggregates through the API and purges them when the test ends."""

    def __init__(self, stack: Stack, prefix: str) -> None:
        self.stack = stack
        self.prefix = prefix
        self.created: list[int] = []

    def __call__(self, hosts: tuple[str, ...] = (), zone: str | None = None,
                 metadata: dict[str, str] | None = None) -> dict[str, Any]:
        """:returns: the aggregate as the API shows it after adding the hosts."""
        body: dict[str, Any] = {"name": f"{self.prefix}-{len(self.created)}"}
        if zone is not None:
            body["availability_zone"] = zone
        resp = self.stack.api_request("POST", "os-aggregates", json={"aggregate": body})
        resp.raise_for_status()
        agg: dict[str, Any] = resp.json()["aggregate"]
        self.created.append(agg["id"])
        actions: list[dict[str, Any]] = [{"add_host": {"host": h}} for h in hosts]
        if metadata:
            actions.append({"set_metadata": {"metadata": metadata}})
        for action in actions:
            resp = self.stack.api_request("POST", f"os-aggregates/{agg['id']}/action",
                                          json=action)
            resp.raise_for_status()
            agg = resp.json()["aggregate"]
        return agg

    def purge(self) -> None:
        for aggregate_id in reversed(self.created):
            self.stack.purge_aggregate(aggregate_id)


@pytest.fixture
def make_aggregate(stack: Stack, aggregate_name: str) -> Iterator[AggregateFactory]:
    """``make_aggregate(hosts=("compute1",))`` -> a new aggregate, deleted after the test."""
    factory = AggregateFactory(stack, aggregate_name)
    yield factory
    factory.purge()


@pytest.fixture
def aggregate_name(request: pytest.FixtureRequest) -> str:
    """A unique aggregate name for one test (``it-<test>-<time>``)."""
    stamp = datetime.datetime.now().strftime("%H%M%S%f")
    return f"it-{request.node.name[:40]}-{stamp}"
