"""``fleetcache`` (fleetcache.cmd.client): the client's commands, and ``fleetcache demo`` run
on the services the daemons' entry points build."""

from __future__ import annotations

from typing import Any

import pytest

from fleetcache import demo
from fleetcache.client import cli
from fleetcache.cmd import client, compute, conductor


def test_demo_runs_on_the_daemons_builders(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []

    def fake_run(builders: demo.Builders, hosts: int, keep: bool, verbose: bool) -> int:
        calls.append((builders, hosts, keep, verbose))
        return 7

    monkeypatch.setattr(demo, "run", fake_run)
    assert client.main(["demo", "--hosts", "2", "--keep"]) == 7
    [(builders, hosts, keep, verbose)] = calls
    assert builders.conductor is conductor.build_service
    assert builders.compute is compute.build_service
    assert (hosts, keep, verbose) == (2, True, False)


def test_demo_is_the_entry_points_not_the_clients(capsys: pytest.CaptureFixture[str]) -> None:
    assert "demo" in client.cli.build_parser(demo=True).format_help()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["demo"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'demo'" in capsys.readouterr().err
