"""The suite's autouse fixture (tests/conftest.py) gives logging back after a test that set
up oslo.log in-process, as a command does."""

from __future__ import annotations

import logging
import pathlib
import sys

from oslo_config import cfg

from fleetcache.cmd import common
from tests import conftest


def test_logging_is_given_back_after_a_command_set_up_oslo_log(tmp_path: pathlib.Path) -> None:
    root, named = logging.getLogger(), logging.getLogger("stevedore.named")
    named.setLevel(logging.DEBUG)  # oslo.log sets it to ERROR ([DEFAULT] default_log_levels)
    handlers, hook = list(root.handlers), sys.excepthook
    restore = conftest._restore_logging.__wrapped__()  # type: ignore[attr-defined]
    next(restore)
    path = tmp_path / "fleetcache.conf"
    path.write_text("[DEFAULT]\n")
    common.parse_config(["--config-file", str(path)], "fleetcache-test", cfg.ConfigOpts())
    added = [handler for handler in root.handlers if handler not in handlers]
    assert added and named.level == logging.ERROR and sys.excepthook is not hook
    next(restore, None)
    assert root.handlers == handlers
    assert named.level == logging.DEBUG
    assert sys.excepthook is hook
