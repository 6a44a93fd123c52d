"""``fleetcache-api``: the REST API under gunicorn (``gthread`` workers with a read deadline).

Listens on ``[api] bind_host``:``[api] bind_port`` with ``[api] workers`` processes of
``[api] threads`` threads each; a request that takes longer than ``[api] client_timeout`` to
arrive is cut off (``api_worker.DeadlineThreadWorker``). Each worker builds the application
itself after the fork, so no database connection or RPC transport is shared between processes.
SIGTERM (and SIGINT) stop accepting connections and let requests in flight finish for
``[api] graceful_timeout`` seconds: gunicorn's arbiter does that.

Before gunicorn starts, the database schema, the transport URL, the policy file, the
listening address and, with unified limits, ``[oslo_limit]`` are checked, so that a
configuration or environment problem ends the command with one line (the workers would
otherwise each print a traceback, or gunicorn retry the bind for 5 s).
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from typing import Any

from gunicorn.app.base import BaseApplication  # type: ignore[import-untyped]
from oslo_config import cfg

from fleetcache.api import policy, wsgi
from fleetcache.api.quota import limit_conf
from fleetcache.cmd import api_worker, common
from fleetcache.common import binaries
from fleetcache.common.config import quota as quota_config

BINARY = binaries.API


class GunicornApplication(BaseApplication):  # type: ignore[misc]
    """gunicorn driven from our configuration instead of its command line."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf
        super().__init__()

    def load_config(self) -> None:
        for key, value in gunicorn_options(self.conf).items():
            if key in self.cfg.settings:  # settings newer than the installed gunicorn are skipped
                self.cfg.set(key, value)

    def load(self) -> Any:
        return wsgi.init_application(self.conf)


def gunicorn_options(conf: cfg.ConfigOpts) -> dict[str, Any]:
    """gunicorn settings from ``[api]``."""
    host = conf.api.bind_host
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return {
        "bind": [f"{host}:{conf.api.bind_port}"],
        "worker_class": api_worker.DeadlineThreadWorker,
        "workers": conf.api.workers,
        "threads": conf.api.threads,
        "graceful_timeout": conf.api.graceful_timeout,
        "keepalive": conf.api.keepalive,
        "proc_name": BINARY,
        "accesslog": None,  # fleetcache.api.middleware.RequestLog logs every request
        "errorlog": "-",
        "loglevel": "debug" if conf.debug else "info",
        "preload_app": False,
        # gunicorn >= 25 opens a control socket at one fixed path per user: two APIs on a
        # host would fight over it, and nothing of fleetcache uses it.
        "control_socket_disable": True,
    }


def check_bind(conf: cfg.ConfigOpts) -> None:
    """Exit with one line when ``[api] bind_host``:``bind_port`` cannot be listened on (in
    use, or not an address of this host), binding as gunicorn does (``SO_REUSEADDR``)."""
    host, port = conf.api.bind_host, conf.api.bind_port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            common.config_error(
                BINARY, f"cannot listen on {host}:{port} ([api] bind_host, bind_port): "
                f"{exc.strerror or exc}; stop what listens there or choose another address")


def check_policy(conf: cfg.ConfigOpts) -> None:
    """Exit with one line when ``[oslo_policy] policy_file`` cannot be loaded.

    oslo.policy lets whatever reading or parsing the file raised through (``OSError``,
    ``UnicodeDecodeError``, a YAML error, ``TypeError`` or ``AttributeError`` for a document
    of the wrong shape), hence the broad catch of this start-up check.
    """
    try:
        policy.get_enforcer(conf)
    except Exception as exc:  # noqa: BLE001 - see the docstring
        reason = " ".join(str(exc).split())
        common.config_error(
            BINARY, f"cannot load the policy file {conf.oslo_policy.policy_file} "
            f"([oslo_policy] policy_file): {type(exc).__name__}: {reason}; fix or remove it "
            "(etc/fleetcache/policy.yaml.sample shows the format)")


def check_quota(conf: cfg.ConfigOpts) -> None:
    """Exit with one line when ``[quota] driver = unified_limits`` and ``[oslo_limit]`` says
    neither who reads Keystone's limits nor whose limits (every server create would be a
    503). Keystone itself is not asked: the API starts while it is down."""
    if conf.quota.driver != quota_config.UNIFIED_LIMITS:
        return
    problem = limit_conf.problem(conf)
    if problem:
        common.config_error(BINARY, f"{problem} ([quota] driver = unified_limits; "
                            "driver = noop for no quota)")


def main(argv: Sequence[str] | None = None) -> int:
    conf = common.parse_config(argv, BINARY, conf=cfg.ConfigOpts())
    common.open_database(conf, BINARY).dispose()  # fail now if the schema is not current
    common.check_transport_url(conf, BINARY)
    check_policy(conf)
    check_bind(conf)
    check_quota(conf)
    GunicornApplication(conf).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
