"""What every test tree shares: ``conf``, fleetcache's options registered and parsed from
nothing (no command line, no configuration file), so that a test sees the defaults and sets
what it needs with ``set_override``.

A tree or module that needs more defines its own ``conf`` on top of this one (pytest hands
the outer fixture to an inner one of the same name)::

    @pytest.fixture
    def conf(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> cfg.ConfigOpts:
        conf.set_override("instances_path", str(tmp_path / "instances"))
        return conf

And, around every test, logging given back as it was (:func:`_restore_logging`).
"""

from __future__ import annotations

import logging
import sys
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
def _restore_logging() -> Iterator[None]:
    """Give logging back as it was after the test: the root logger's handlers, every logger's
    level and ``sys.excepthook``.

    A test that runs a command or the API's application loading in-process (``manage.main``,
    ``fleetcache.cmd.common.parse_config``, ``fleetcache.api.wsgi.load_conf``) has oslo.log's
    ``log.setup`` take over logging: it removes the root logger's handlers and adds a
    ``StreamHandler`` on the ``sys.stdout``/``sys.stderr`` of that moment, which is pytest's
    capture of that test (``capsys``'s is closed when the test ends); it sets the levels of
    the ``default_log_levels`` loggers (``oslo_messaging``, ``stevedore``, ...); it installs
    an excepthook that logs. Left there, the handler would get the records of every later
    test, and a daemon thread of one logging between two test phases would print "--- Logging
    error --- ValueError: I/O operation on closed file"; the levels would decide what later
    tests' ``caplog`` sees. Within the test itself, pytest's handlers stay removed after the
    set-up: records logged after it are not captured.
    """
    root = logging.getLogger()
    handlers = list(root.handlers)
    levels = _logger_levels()
    excepthook = sys.excepthook
    yield
    sys.excepthook = excepthook
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    for name, level in _logger_levels().items():
        before = levels.get(name, logging.NOTSET)
        if level != before:
            logging.getLogger(name or None).setLevel(before)


def _logger_levels() -> dict[str, int]:
    """The level of every logger that exists, the root's under ``""``."""
    levels = {name: logger.level for name, logger in logging.Logger.manager.loggerDict.items()
              if isinstance(logger, logging.Logger)}
    levels[""] = logging.getLogger().level
    return levels
