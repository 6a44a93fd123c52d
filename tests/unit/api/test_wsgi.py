"""The WSGI entry points: configuration files from the environment, the lazy application."""

from __future__ import annotations

import pathlib

import pytest
import webtest

from fleetcache.api import wsgi


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ["/etc/fleetcache/fleetcache.conf"]),
        ("", ["/etc/fleetcache/fleetcache.conf"]),
        ("/a.conf", ["/a.conf"]),
        ("/a.conf /b.conf", ["/a.conf", "/b.conf"]),
        ("/a.conf,/b.conf , /c.conf", ["/a.conf", "/b.conf", "/c.conf"]),
    ],
)
def test_config_files(value: str | None, expected: list[str]) -> None:
    environ = {} if value is None else {wsgi.CONFIG_FILE_ENV: value}
    assert wsgi.config_files(environ) == expected


def test_lazy_application_reads_env_config(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleetcache.common.db import migration
    from fleetcache.common.db.session import Database

    url = f"sqlite:///{tmp_path}/w.sqlite"
    migration.db_sync(Database(url))
    conf_file = tmp_path / "fleetcache.conf"
    conf_file.write_text(
        f"[DEFAULT]\nstate_path = {tmp_path}\n[database]\nconnection = {url}\n"
        "[api]\nauth_strategy = noauth\npublic_endpoint = http://api.example:1\n"
    )
    monkeypatch.setenv(wsgi.CONFIG_FILE_ENV, f"{conf_file}")
    app = webtest.TestApp(wsgi._LazyApplication())
    assert app.get("/v2.1").json["version"]["links"][0]["href"] == "http://api.example:1/v2.1/"
    assert app.get("/v2.1/os-aggregates").json == {"aggregates": []}
