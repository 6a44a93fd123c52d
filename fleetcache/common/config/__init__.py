"""Every configuration option of fleetcache, one module per option group.

Nothing here reads configuration at import time: :func:`register_all` registers the options on
the ``ConfigOpts`` a daemon was given, and callers pass that object down.
"""

from __future__ import annotations

from oslo_config import cfg

from fleetcache.common.config.opts import MODULES

CONF = cfg.CONF


def register_all(conf: cfg.ConfigOpts) -> None:
    """Register every fleetcache option group on ``conf`` (idempotent)."""
    for module in MODULES:
        module.register_opts(conf)
