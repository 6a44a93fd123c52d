"""What every test tree shares: ``conf``, fleetcache's options registered and parsed from
nothing (no command line, no configuration file), so that a test sees the defaults and sets
what it needs with ``set_override``.

A tree or module that needs more defines its own ``conf`` on top of this one (pytest hands
the outer fixture to an inner one of the same name)::

    @pytest.fixture
    def conf(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> cfg.ConfigOpts:
        conf.set_override("instances_path", str(tmp_path / "instances"))
        return conf
"""

from __future__ import annotations

import pytest
from oslo_config import cfg

from fleetcache.common import config


@pytest.fixture
def conf() -> cfg.ConfigOpts:
    """Every fleetcache option at its default; no file read, not even the system's."""
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([], project="fleetcache", default_config_files=[], default_config_dirs=[])
    return conf
