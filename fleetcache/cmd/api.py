"""``fleetcache-api``: the REST API under gunicorn (``gthread`` workers with a read deadline).

Listens on ``[api] bind_host``:``[api] bind_port`` with ``[api] workers`` processes of
``[api] threads`` threads each; a request that takes longer than ``[api] client_timeout`` to
arrive is cut off (``api_worker.DeadlineThreadWorker``). Each worker builds the application
itself after the fork, so no database connection or RPC transport is shared between processes.
SIGTERM (and SIGINT) stop accepting connections and let requests in flight finish for
``[api] graceful_timeout`` seconds: gunicorn's arbiter does that.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from gunicorn.app.base import BaseApplication  # type: ignore[import-untyped]
from oslo_config import cfg

from fleetcache.api import wsgi
from fleetcache.cmd import api_worker, common
from fleetcache.common import binaries

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
        "proc_name": BINARY,
        "accesslog": None,  # fleetcache.api.middleware.RequestLog logs every request
        "errorlog": "-",
        "loglevel": "debug" if conf.debug else "info",
        "preload_app": False,
        # gunicorn >= 25 opens a control socket at one fixed path per user: two APIs on a
        # host would fight over it, and nothing of fleetcache uses it.
        "control_socket_disable": True,
    }


def main(argv: Sequence[str] | None = None) -> int:
    conf = common.parse_config(argv, BINARY, conf=cfg.ConfigOpts())
    common.open_database(conf, BINARY).dispose()  # fail now if the schema is not current
    GunicornApplication(conf).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
