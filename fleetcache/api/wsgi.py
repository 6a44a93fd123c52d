"""The WSGI entry points: ``init_application(conf)`` and a lazy module-level ``application``.

WSGI servers load ``fleetcache.api.wsgi:application``; on its first request it reads the
configuration files named in ``FLEETCACHE_CONFIG_FILE`` (separated by spaces or commas;
default ``/etc/fleetcache/fleetcache.conf``) and builds the application once.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

from oslo_config import cfg
from oslo_log import log as logging

from fleetcache.api import deploy, middleware, quota
from fleetcache.api.state import CacheImagesAPI, HostUptimeAPI
from fleetcache.common import config

CONFIG_FILE_ENV = "FLEETCACHE_CONFIG_FILE"
DEFAULT_CONFIG_FILE = "/etc/fleetcache/fleetcache.conf"


def init_application(conf: cfg.ConfigOpts, conductor_api: CacheImagesAPI | None = None,
                     compute_api: HostUptimeAPI | None = None) -> Any:
    """The API application for an already parsed ``conf``; the RPC clients can be replaced
    (fast tests only)."""
    config.register_all(conf)
    middleware.register_keystone_opts(conf)
    quota.register_opts(conf)
    return deploy.deploy(conf, conductor_api, compute_api)


def config_files(environ: dict[str, str] | None = None) -> list[str]:
    """The files ``FLEETCACHE_CONFIG_FILE`` names, or the default one."""
    value = (os.environ if environ is None else environ).get(CONFIG_FILE_ENV, "")
    files = [f for f in re.split(r"[\s,]+", value) if f]
    return files or [DEFAULT_CONFIG_FILE]


def load_conf(files: list[str]) -> cfg.ConfigOpts:
    """A parsed configuration from ``files``, with oslo.log set up from it."""
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    middleware.register_keystone_opts(conf)
    quota.register_opts(conf)
    logging.register_options(conf)
    conf([], project="fleetcache", default_config_files=files)
    logging.setup(conf, "fleetcache")
    return conf


class _LazyApplication:
    """Builds the real application on the first request (after the server has forked)."""

    def __init__(self) -> None:
        self._application: Any = None
        self._lock = threading.Lock()

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        with self._lock:
            if self._application is None:
                self._application = init_application(load_conf(config_files()))
        result: Iterable[bytes] = self._application(environ, start_response)
        return result


application = _LazyApplication()
