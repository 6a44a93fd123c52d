"""``fleetcache-manage placement sync-aggregates`` and ``fleetcache-manage status`` against a
real Placement (in-process) and SQLite in ``tmp_path``."""

from __future__ import annotations

import pathlib

import pytest
from oslo_config import cfg

from fleetcache.cmd import manage
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import migration
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from fleetcache.conductor.placement import PlacementClient, ProviderSync, provider_uuid
from tests.functional.conductor.test_placement_provider import capabilities
from tests.functional.conftest import unique_host

COMPUTE = "fleetcache-compute"


class Manage:
    def __init__(self, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str],
                 placement: str | None) -> None:
        self.url = f"sqlite:///{tmp_path}/manage.sqlite"
        self.conf_file = tmp_path / "fleetcache.conf"
        section = ("" if placement is None else
                   f"[placement]\nauth_type = admin_token\nendpoint = {placement}\n"
                   "token = admin\n")
        self.conf_file.write_text(
            f"[DEFAULT]\nservice_down_time = 60\n[database]\nconnection = {self.url}\n{section}")
        self.capsys = capsys
        self.db = Database(self.url)
        migration.db_sync(self.db)

    def __call__(self, *args: str) -> tuple[int, str, str]:
        try:
            code = manage.main(["--config-file", str(self.conf_file), *args], cfg.ConfigOpts())
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = self.capsys.readouterr()
        return code, out, err


@pytest.fixture
def run(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str],
        placement_endpoint: str) -> Manage:
    return Manage(tmp_path, capsys, placement_endpoint)


def _in_placement(run: Manage, client: PlacementClient, host: str) -> None:
    caps = capabilities()
    db_services.service_register(run.db, host, COMPUTE, "compute", None, caps)
    ProviderSync(client, 3).sync(host, caps, set())
    assert db_services.service_placement_synced(run.db, host, COMPUTE, caps)


def test_sync_aggregates_repairs_drift_and_says_what_it_changed(
    run: Manage, placement_client: PlacementClient,
) -> None:
    in_agg, drifted, unreported = (unique_host() for _ in range(3))
    for host in (in_agg, drifted):
        _in_placement(run, placement_client, host)
    db_services.service_register(run.db, unreported, COMPUTE, "compute", None, capabilities())
    agg = db_aggregates.aggregate_create(run.db, "agg")
    db_aggregates.aggregate_add_host(run.db, agg["id"], in_agg)
    stray = "0b6f3c1e-0000-4000-8000-00000000beef"
    rp = provider_uuid(drifted)
    placement_client.put_aggregates(rp, placement_client.get_aggregates(rp)[0], {stray})

    code, out, _ = run("placement", "sync-aggregates")

    assert code == 0, out
    assert f"{in_agg}: +aggregates {agg['uuid']}" in out
    assert f"{drifted}: -aggregates {stray}" in out
    assert f"{unreported}: no resource provider yet (skipped)" in out
    assert "2 of 3 resource provider(s) changed" in out
    assert placement_client.get_aggregates(provider_uuid(in_agg))[1] == {agg["uuid"]}
    assert placement_client.get_aggregates(rp)[1] == set()
    assert run("placement", "sync-aggregates")[1].endswith("0 of 3 resource provider(s) changed\n")


def test_status_warns_while_an_up_compute_has_no_image_type_traits(
    run: Manage, placement_client: PlacementClient,
) -> None:
    _in_placement(run, placement_client, "ok-host")
    code, out, _ = run("status")
    assert code == 0, out
    assert "Check: Image-type traits" in out and "Result: Success" in out

    db_services.service_register(run.db, "old-host", COMPUTE, "compute", None,
                                 {"has_imagecache": 1})
    db_services.service_register(run.db, "new-host", COMPUTE, "compute", None, capabilities())
    code, out, _ = run("status")
    assert code == 1, out
    flat = " ".join(out.replace("|", " ").split())
    assert "old-host (reports no image types)" in flat
    assert "new-host (not yet in Placement)" in flat
    assert "ok-host" not in flat


def test_status_fails_without_placement(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = Manage(tmp_path, capsys, None)("status")
    assert code == 2
    assert "auth_type is not set" in " ".join(out.replace("|", " ").split())


def test_sync_aggregates_without_placement_is_an_error(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = Manage(tmp_path, capsys, None)("placement", "sync-aggregates")
    assert code == 1 and "[placement] auth_type" in err


def test_status_fails_on_an_unknown_scheduler_filter(run: Manage) -> None:
    with open(run.conf_file, "a") as conf:
        conf.write("[filter_scheduler]\nenabled_filters = ComputeFilter,RamFilter\n")
    code, out, _ = run("status")
    flat = " ".join(out.replace("|", " ").split())
    assert code == 2, out
    assert "Check: Scheduler filters" in flat and "unknown filter(s) RamFilter" in flat
