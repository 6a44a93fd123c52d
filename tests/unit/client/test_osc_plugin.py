"""The ``openstack`` client plugin: ``make_client`` on the client's session and catalog, and the
``aggregate cache job`` commands on a fake API (output and exit status)."""

from __future__ import annotations

import argparse
import io
from typing import Any

import pytest
from osc_lib import exceptions

from fleetcache.client.api_client import ApiError
from fleetcache.client.osc import plugin, v1
from tests.unit.client.test_cli import _job


class FakeInstance:
    region_name = "RegionOne"
    interface = "public"
    timeout = None

    class session:  # noqa: N801 - stands in for a keystoneauth session
        @staticmethod
        def get_token() -> str:
            return "tok"

    def get_endpoint_for_service_type(self, service_type: str, region_name: str,
                                      interface: str) -> str:
        assert (service_type, region_name, interface) == ("compute", "RegionOne", "public")
        return "http://api:8774/v2.1"


def test_make_client_uses_the_catalog_and_the_session_token() -> None:
    api = plugin.make_client(FakeInstance())
    assert api.endpoint == "http://api:8774/v2.1"
    assert api.token_source is not None and api.token_source() == "tok"
    parser = plugin.build_option_parser(argparse.ArgumentParser())
    assert parser.parse_args([]).os_fleetcache_api_version == "1"


class FakeApi:
    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job

    def find_aggregate(self, ident: str) -> dict[str, Any]:
        if ident != "edge":
            raise ApiError(404, f"no aggregate with id, uuid or name {ident!r}")
        return {"id": 7, "name": "edge"}

    def list_jobs(self, aggregate_id: int) -> list[dict[str, Any]]:
        return [{**self.job, "created_at": "2026-11-21T04:00:00"}]

    def find_job(self, job_id: str, aggregate: str | None = None) -> dict[str, Any]:
        return self.job

    def cache_images(self, aggregate_id: int, image_ids: list[str]) -> str:
        return "http://api/v2.1/os-aggregates/7/images/jobs/job-1"

    def wait_job(self, location: str, on_update: Any = None, timeout: Any = None) -> Any:
        on_update(self.job)
        return self.job


class FakeApp:
    def __init__(self, api: FakeApi) -> None:
        self.stdout = io.StringIO()
        self.client_manager = type("CM", (), {"fleetcache": api})()


def _run(cls: type, api: FakeApi, *argv: str) -> tuple[Any, str]:
    app = FakeApp(api)
    cmd = cls(app, None)
    result = cmd.take_action(cmd.get_parser("openstack").parse_args(list(argv)))
    return result, app.stdout.getvalue()


def test_show_prints_the_per_host_table_and_fails_on_errors() -> None:
    status, out = _run(v1.ShowCacheJob, FakeApi(_job(cached=1, error=1)), "job-1")
    assert status == 1
    assert "| c2   | error *" in out and "MessagingTimeout: x" in out
    assert out.splitlines()[-1].startswith("Job job-1 on aggregate 7: done")


def test_list_columns_and_rows() -> None:
    (columns, rows), _ = _run(v1.ListCacheJobs, FakeApi(_job()), "edge")
    assert columns[0] == "ID" and list(rows)[0][:2] == ("job-1", "done")


def test_create_waits_with_a_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    status, out = _run(v1.CreateCacheJob, FakeApi(_job(cached=3)), "edge", "img", "--wait")
    assert status == 0 and "| c1 " in out
    assert "3/3 hosts" in capsys.readouterr().err
    _, out = _run(v1.CreateCacheJob, FakeApi(_job()), "edge", "img")
    assert out == "job-1\n"


def test_api_errors_become_command_errors() -> None:
    with pytest.raises(exceptions.CommandError, match="no aggregate"):
        _run(v1.ListCacheJobs, FakeApi(_job()), "nowhere")
