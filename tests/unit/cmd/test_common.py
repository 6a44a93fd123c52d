"""Tests of fleetcache.cmd.common: configuration errors end a command cleanly."""

from __future__ import annotations

import pathlib

import pytest
from oslo_config import cfg

from fleetcache.cmd import common


def _parse(tmp_path: pathlib.Path, text: str) -> cfg.ConfigOpts:
    path = tmp_path / "fleetcache.conf"
    path.write_text(text)
    return common.parse_config(["--config-file", str(path)], "fleetcache-test", cfg.ConfigOpts())


def test_bad_value_names_the_option_and_exits_2(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parse(tmp_path, "[DEFAULT]\nreport_interval = often\n")
    assert exit_.value.code == common.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "[DEFAULT] report_interval" in err
    assert "Traceback" not in err


def test_out_of_range_value_in_a_group_names_group_and_option(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        _parse(tmp_path, "[conductor]\ncell_refresh_interval = 1\n")
    err = capsys.readouterr().err
    assert "[conductor] cell_refresh_interval" in err
    assert "greater than or equal to 5" in err


def test_bad_value_of_a_command_line_option_in_a_file_names_it_and_exits_2(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """oslo.config itself writes ``argument --use_syslog: Invalid Boolean value: perhaps``
    and exits 1 for these (``debug``, ``use_syslog``...: options oslo.log also takes on the
    command line)."""
    with pytest.raises(SystemExit) as exit_:
        _parse(tmp_path, "[DEFAULT]\nuse_syslog = perhaps\n")
    assert exit_.value.code == common.EXIT_CONFIG
    assert capsys.readouterr().err == (
        "fleetcache-test: configuration error: invalid value for option [DEFAULT] use_syslog: "
        "'perhaps' is not a valid Boolean value\n")


def test_bad_command_line_is_still_reported_by_argparse(
    capsys: pytest.CaptureFixture[str]
) -> None:
    """What oslo.config writes while parsing is held back only to be passed on."""
    with pytest.raises(SystemExit) as exit_:
        common.parse_config(["--no-such-flag"], "fleetcache-test", cfg.ConfigOpts())
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: fleetcache-test ")
    assert err.endswith("fleetcache-test: error: unrecognized arguments: --no-such-flag\n")


def test_missing_config_file_exits_2(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        common.parse_config(["--config-file", str(tmp_path / "nope.conf")], "x", cfg.ConfigOpts())
    assert exit_.value.code == common.EXIT_CONFIG
    assert "nope.conf" in capsys.readouterr().err


def test_good_file_parses_and_daemon_defaults_apply(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "fleetcache.conf"
    path.write_text("[DEFAULT]\nhost = node7\n")
    conf = common.parse_config(["--config-file", str(path)], "x", cfg.ConfigOpts(),
                               defaults={"executor_thread_pool_size": 8})
    assert conf.host == "node7"
    assert conf.executor_thread_pool_size == 8


def test_daemon_default_can_be_overridden_in_the_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "fleetcache.conf"
    path.write_text("[DEFAULT]\nexecutor_thread_pool_size = 3\n")
    conf = common.parse_config(["--config-file", str(path)], "x", cfg.ConfigOpts(),
                               defaults={"executor_thread_pool_size": 8})
    assert conf.executor_thread_pool_size == 3


def test_open_database_refuses_an_unsynced_schema(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = _parse(tmp_path, f"[database]\nconnection = sqlite:///{tmp_path}/x.sqlite\n")
    with pytest.raises(SystemExit) as exit_:
        common.open_database(conf, "fleetcache-conductor")
    assert exit_.value.code == 1
    assert "fleetcache-manage db sync" in capsys.readouterr().err


def test_redact_db_url() -> None:
    assert common.redact_db_url("mysql+pymysql://root:pw@h/db") == "mysql+pymysql://root:***@h/db"


def test_other_errors_of_the_log_set_up_are_not_taken_for_a_log_destination(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the two known problems (``syslog_log_facility``, ``use_journal``) become one line:
    a ``TypeError`` or ``RuntimeError`` of oslo.log with neither option set is a bug, and its
    traceback is kept."""
    def broken_setup(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug in the log set-up")

    monkeypatch.setattr(common.log, "setup", broken_setup)
    with pytest.raises(RuntimeError, match="a bug in the log set-up"):
        _parse(tmp_path, "[DEFAULT]\n")
