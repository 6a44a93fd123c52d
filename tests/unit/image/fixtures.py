"""Shared helpers of the image and compute tests: a private ``ConfigOpts``."""

from __future__ import annotations

from typing import Any

from oslo_config import cfg

from fleetcache.common import config


def make_conf(**overrides: Any) -> cfg.ConfigOpts:
    """A fresh configuration with every fleetcache option; ``group__name=value`` overrides."""
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([], project="fleetcache", default_config_files=[], default_config_dirs=[])
    for key, value in overrides.items():
        group, _, name = key.rpartition("__")
        conf.set_override(name, value, group=group or None)
    return conf
