"""What every test tree shares: ``conf``, fleetcache's options registered and parsed from
nothing (no command line, no configuration file), so that a test sees the defaults and sets
what it needs with ``set_override``.

A tree or module that needs more defines its own ``conf`` on top of this one (pytest hands
the outer fixture to an inner one of the same name)::

    @pytest.fixture
    def conf(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> cfg.ConfigOpts:
        conf.set_override("instances_path", str(tmp_path / "instances"))
        return conf

And, around every test, the root logger given back as it was (:func:`_restore_root_logger`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

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


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    """Give the root logger back its handlers and level after the test.

    A test that runs a command or the API's application loading in-process (``manage.main``,
    ``fleetcache.cmd.common.parse_config``, ``fleetcache.api.wsgi.load_conf``) has oslo.log's
    ``log.setup`` take over the root logger: it removes its handlers and adds a
    ``StreamHandler`` on the ``sys.stdout``/``sys.stderr`` of that moment, which is pytest's
    capture of that test (``capsys``'s is closed when the test ends). Left there, it would get
    the records of every later test, and a daemon thread of one logging between two test phases
    would print "--- Logging error --- ValueError: I/O operation on closed file".
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)
