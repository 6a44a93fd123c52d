"""Unit tests of the compute's privsep context (fleetcache.privsep): no capabilities, and a
helper started from the interpreter's own bin directory with the compute's config files."""

from __future__ import annotations

import os
import pathlib
import shlex
import sys

from oslo_config import cfg

from fleetcache import privsep
from tests.unit.image.fixtures import make_conf


def _conf_with_files(*files: pathlib.Path) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    conf(args=[], default_config_files=[str(f) for f in files], default_config_dirs=[])
    return conf


def test_context_keeps_no_capability() -> None:
    assert privsep.compute_ctx.conf.capabilities == []


def test_helper_is_the_privsep_helper_beside_the_interpreter(tmp_path: pathlib.Path) -> None:
    conf_file = tmp_path / "compute.conf"
    conf_file.write_text("[DEFAULT]\n")
    cmd = privsep.helper_command(_conf_with_files(conf_file))
    assert cmd == [os.path.join(os.path.dirname(sys.executable), "privsep-helper"),
                   "--config-file", str(conf_file)]
    assert privsep.helper_command(make_conf(), bindir="/venv/bin") == ["/venv/bin/privsep-helper"]


def test_configure_sets_the_helper_unless_the_files_name_one(tmp_path: pathlib.Path) -> None:
    conf_file = tmp_path / "compute.conf"
    conf_file.write_text("[DEFAULT]\n")
    try:
        privsep.configure(_conf_with_files(conf_file))
        assert shlex.split(cfg.CONF[privsep.CFG_SECTION].helper_command) == \
            privsep.helper_command(_conf_with_files(conf_file))
        conf_file.write_text(f"[{privsep.CFG_SECTION}]\nhelper_command = sudo /v/privsep-helper\n")
        privsep.configure(_conf_with_files(conf_file))
        assert cfg.CONF[privsep.CFG_SECTION].helper_command == "sudo /v/privsep-helper"
    finally:
        cfg.CONF.clear_override("helper_command", group=privsep.CFG_SECTION)
