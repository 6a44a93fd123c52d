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
        for group, _opts in module.list_opts():
            if isinstance(group, cfg.OptGroup):
                # NOTE: ConfigOpts.register_group keeps a shallow copy of the group, which
                # shares the module-level group's option table; overrides set on one
                # ConfigOpts would then leak into every other one in the process (tests, the
                # embedded demo, benchmark processes holding many computes). A fresh group
                # per ConfigOpts keeps them apart.
                conf.register_group(cfg.OptGroup(group.name, title=group.title, help=group.help))
        module.register_opts(conf)
