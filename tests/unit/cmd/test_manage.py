"""Tests of ``fleetcache-manage`` against SQLite in ``tmp_path``."""

from __future__ import annotations

import pathlib

import pytest
from oslo_config import cfg

from fleetcache.cmd import manage
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import migration
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database


class Manage:
    def __init__(self, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.url = f"sqlite:///{tmp_path}/manage.sqlite"
        self.conf_file = tmp_path / "fleetcache.conf"
        self.conf_file.write_text(
            f"[DEFAULT]\nservice_down_time = 60\n[database]\nconnection = {self.url}\n")
        self.capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str, str]:
        """Run one command; :returns: exit status, stdout, stderr."""
        try:
            code = manage.main(["--config-file", str(self.conf_file), *args], cfg.ConfigOpts())
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = self.capsys.readouterr()
        return code, out, err

    def db(self) -> Database:
        return Database(self.url)


@pytest.fixture
def run(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> Manage:
    return Manage(tmp_path, capsys)


@pytest.fixture
def synced(run: Manage) -> Manage:
    assert run("db", "sync")[0] == 0
    return run


def test_db_version_before_and_after_sync(run: Manage) -> None:
    assert run("db", "version")[:2] == (0, "None (never synced)\n")
    code, out, _ = run("db", "sync")
    head = migration.head_revision()
    assert code == 0 and f"revision {head}" in out
    assert run("db", "version")[:2] == (0, f"{head}\n")


def test_other_commands_refuse_an_unsynced_database(run: Manage) -> None:
    code, _, err = run("cell", "list")
    assert code == 1
    assert "db sync" in err


def test_cell_create_list_update_delete(synced: Manage) -> None:
    run = synced
    code, out, _ = run("cell", "create", "--name", "cell1",
                       "--transport-url", "rabbit://guest:s3cret@127.0.0.1:5672/c1")
    assert code == 0 and "cell1" in out
    code, out, _ = run("cell", "list")
    assert "cell1" in out and "guest:***@" in out and "s3cret" not in out
    assert "s3cret" in run("cell", "list", "--verbose")[1]
    assert run("cell", "update", "cell1", "--name", "cellA")[0] == 0
    assert run("cell", "update", "cellA", "--transport-url", "rabbit://h/other")[0] == 0
    assert [c["transport_url"] for c in db_cells.cell_list(run.db())] == ["rabbit://h/other"]
    assert run("cell", "delete", "cellA")[0] == 0
    assert db_cells.cell_list(run.db()) == []


def test_cell_errors(synced: Manage) -> None:
    run = synced
    assert run("cell", "create", "--name", "c", "--transport-url", "rabbit://h/")[0] == 0
    code, _, err = run("cell", "create", "--name", "c", "--transport-url", "rabbit://h/x")
    assert code == 1 and "already exists" in err
    code, _, err = run("cell", "create", "--name", "d", "--transport-url", "not a url")
    assert code == 1 and "--transport-url" in err
    code, _, err = run("cell", "delete", "nope")
    assert code == 1 and "could not be found" in err
    code, _, err = run("cell", "update", "c")
    assert code == 1 and "--name" in err


def test_cell_delete_refuses_while_services_are_mapped(synced: Manage) -> None:
    run = synced
    run("cell", "create", "--name", "c", "--transport-url", "rabbit://h/")
    db = run.db()
    [cell] = db_cells.cell_list(db)
    db_services.service_register(db, "h1", "fleetcache-compute", "compute", cell["id"])
    code, _, err = run("cell", "delete", "c")
    assert code == 1 and "h1" in err


def test_service_list_shows_cell_state_and_status(synced: Manage) -> None:
    run = synced
    run("cell", "create", "--name", "cell1", "--transport-url", "rabbit://h/")
    db = run.db()
    [cell1] = db_cells.cell_list(db)
    db_services.service_register(db, "h1", "fleetcache-compute", "compute", cell1["id"])
    db_services.service_register(db, "h2", "fleetcache-compute", "compute", None)
    svc = db_services.service_get(db, "h2", "fleetcache-compute")
    db_services.service_update(db, svc["id"], forced_down=True)
    code, out, _ = run("service", "list")
    assert code == 0
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in out.splitlines() if line.startswith("| h")}
    assert rows["h1"][:4] == ["fleetcache-compute", "cell1", "up", "enabled"]
    assert rows["h2"][:4] == ["fleetcache-compute", "-", "down", "enabled"]


def test_service_disable_and_enable(synced: Manage) -> None:
    run = synced
    db_services.service_register(run.db(), "h1", "fleetcache-compute", "compute", None)
    assert run("service", "disable", "h1", "--reason", "maintenance")[0] == 0
    svc = db_services.service_get(run.db(), "h1", "fleetcache-compute")
    assert svc["disabled"] and svc["disabled_reason"] == "maintenance"
    assert "maintenance" in run("service", "list")[1]
    assert run("service", "enable", "h1")[0] == 0
    svc = db_services.service_get(run.db(), "h1", "fleetcache-compute")
    assert not svc["disabled"] and svc["disabled_reason"] is None
    code, _, err = run("service", "disable", "ghost")
    assert code == 1 and "ghost" in err


def test_usage_errors_exit_2(run: Manage) -> None:
    assert run("bogus")[0] == 2
    assert run("cell")[0] == 2
    assert run("cell", "create", "--name", "x")[0] == 2
