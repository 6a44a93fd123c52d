"""The ``openstack`` client plugin: ``make_client`` on the client's session and catalog, and the
``aggregate cache job`` commands on a fake API, run through cliff's own ``run`` so that their
output options (``-f json``, ``-c``, ``-f value``) are the real formatters'."""

from __future__ import annotations

import argparse
import io
import json
from typing import Any

import pytest
import yaml
from osc_lib import exceptions

from fleetcache.client.api_client import ApiError
from fleetcache.client.osc import plugin, v1
from tests.unit.client.test_cli import IMG, _job


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
        self.posted: list[tuple[int, list[str], int | None]] = []
        #: The ``terms`` of each post.
        self.terms: list[dict[str, Any] | None] = []

    def find_aggregate(self, ident: str) -> dict[str, Any]:
        if ident != "edge":
            raise ApiError(404, f"no aggregate with id, uuid or name {ident!r}")
        return {"id": 7, "name": "edge"}

    def list_jobs(self, aggregate_id: int) -> list[dict[str, Any]]:
        summary = {k: v for k, v in self.job.items() if k != "hosts"}
        return [{**summary, "created_at": "2026-11-21T04:00:00", "pin_until": None}]

    def find_job(self, job_id: str, aggregate: str | None = None) -> dict[str, Any]:
        return self.job

    def get_job(self, location: str) -> dict[str, Any]:
        return self.job

    def cache_images(self, aggregate_id: int, image_ids: list[str],
                     pin_seconds: int | None = None,
                     terms: dict[str, Any] | None = None) -> str:
        self.terms.append(terms)
        if pin_seconds is not None and pin_seconds > 31622400:
            raise ApiError(400, "Invalid input for field/attribute fleetcache:pin_seconds. "
                           f"Value: {pin_seconds}. {pin_seconds} is greater than the maximum "
                           "of 31622400")
        self.posted.append((aggregate_id, image_ids, pin_seconds))
        return "http://api/v2.1/os-aggregates/7/images/jobs/job-1"

    def wait_job(self, location: str, on_update: Any = None, timeout: Any = None) -> Any:
        on_update(self.job)
        return self.job


class FakeApp:
    def __init__(self, api: FakeApi) -> None:
        self.stdout = io.StringIO()
        self.client_manager = type("CM", (), {"fleetcache": api})()


def _run(cls: type, api: FakeApi, *argv: str) -> tuple[int, str]:
    """Parse ``argv`` as the command's parser does and run it as cliff does: the exit status
    and what it printed."""
    app = FakeApp(api)
    cmd = cls(app, None)
    status = cmd.run(cmd.get_parser("openstack").parse_args(list(argv)))
    return status, app.stdout.getvalue()


def test_show_json_is_the_job_with_its_hosts_and_no_links() -> None:
    job = {**_job(cached=1, error=1, skipped=1), "links": [{"rel": "self", "href": "x"}]}
    status, out = _run(v1.ShowCacheJob, FakeApi(job), "job-1", "-f", "json")
    assert status == 0  # a show succeeds whatever the job's state
    shown = json.loads(out)
    assert shown["id"] == "job-1" and shown["state"] == "done" and "links" not in shown
    assert shown["image_ids"] == [IMG] and shown["counts"]["error"] == 1
    assert {h["host"]: h["images"][0]["state"] for h in shown["hosts"]} == {
        "c1": "cached", "c2": "error", "c3": "skipped"}
    assert shown["hosts"][1]["images"][0]["reason"] == "MessagingTimeout: x"


def test_show_takes_columns_and_the_other_formats() -> None:
    status, out = _run(v1.ShowCacheJob, FakeApi(_job()), "job-1", "-f", "value",
                       "-c", "state", "-c", "total_hosts")
    assert (status, out) == (0, "done\n3\n")
    _, out = _run(v1.ShowCacheJob, FakeApi(_job()), "job-1", "-f", "yaml", "-c", "hosts")
    assert yaml.safe_load(out)["hosts"][2] == {
        "host": "c3", "bytes_downloaded": 0,
        "images": [{"image_id": IMG, "state": "skipped", "reason": "down"}]}
    _, out = _run(v1.ShowCacheJob, FakeApi(_job()), "job-1", "-f", "shell", "-c", "state")
    assert out == 'state="done"\n'


def test_show_table_has_one_line_per_host_in_the_hosts_field() -> None:
    _, out = _run(v1.ShowCacheJob, FakeApi(_job(cached=1, error=1)), "job-1")
    assert "| Field " in out and f"c2: {IMG} error (MessagingTimeout: x)" in out
    assert f"c1: {IMG} cached" in out


def test_host_list_has_one_row_per_host_and_image_and_filters_by_state() -> None:
    _, out = _run(v1.ListCacheJobHosts, FakeApi(_job()), "job-1", "-f", "json")
    rows = json.loads(out)
    assert [(r["Host"], r["Image ID"], r["State"]) for r in rows] == [
        ("c1", IMG, "cached"), ("c2", IMG, "error"), ("c3", IMG, "skipped")]
    assert rows[0]["Download Path"] == "rbd" and rows[2]["Reason"] == "down"
    _, out = _run(v1.ListCacheJobHosts, FakeApi(_job()), "job-1", "--state", "error",
                  "-f", "value", "-c", "Host", "-c", "Reason")
    assert out == "c2 MessagingTimeout: x\n"


def test_list_columns_rows_and_long() -> None:
    _, out = _run(v1.ListCacheJobs, FakeApi(_job()), "edge", "-f", "json")
    (row,) = json.loads(out)
    assert list(row) == list(v1.ListCacheJobs.COLUMNS)
    assert (row["ID"], row["State"], row["Images"]) == ("job-1", "done", [IMG])
    _, out = _run(v1.ListCacheJobs, FakeApi(_job(error=2)), "edge", "--long", "-f", "json")
    (row,) = json.loads(out)
    assert row["Counts"]["error"] == 2 and row["Pin Until"] is None
    assert row["Bytes Downloaded"] == 2048


def test_create_posts_the_pin_and_shows_the_job() -> None:
    api = FakeApi(_job("queued"))
    status, out = _run(v1.CreateCacheJob, api, "edge", "img", "--pin-seconds", "86400",
                       "-f", "value", "-c", "id")
    assert (status, out) == (0, "job-1\n")
    assert api.posted == [(7, ["img"], 86400)]
    _run(v1.CreateCacheJob, api, "edge", "img")
    assert api.posted[-1] == (7, ["img"], None)  # no pin: the key is not sent


@pytest.mark.parametrize(("value", "message"), [
    ("1d", "'1d' is not a whole number of seconds"),
    ("0", "0 is not a positive number of seconds"),
    ("-5", "-5 is not a positive number of seconds"),
])
def test_create_refuses_a_malformed_pin_before_any_request(
        value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    api = FakeApi(_job())
    with pytest.raises(SystemExit) as exit_info:
        _run(v1.CreateCacheJob, api, "edge", "img", "--pin-seconds", value)
    assert exit_info.value.code == 2 and api.posted == []
    assert f"argument --pin-seconds: {message}" in capsys.readouterr().err


def test_create_passes_the_apis_400_on_a_pin_too_long() -> None:
    with pytest.raises(exceptions.CommandError,
                       match="HTTP 400: .*fleetcache:pin_seconds.* greater than the maximum"):
        _run(v1.CreateCacheJob, FakeApi(_job()), "edge", "img", "--pin-seconds", "99999999")


def test_create_wait_shows_progress_then_the_job_and_fails_on_errors(
        capsys: pytest.CaptureFixture[str]) -> None:
    status, out = _run(v1.CreateCacheJob, FakeApi(_job(cached=3)), "edge", "img", "--wait",
                       "-f", "json")
    assert status == 0 and json.loads(out)["counts"]["cached"] == 3
    assert "3/3 hosts" in capsys.readouterr().err  # the progress bar, off stdout
    status, out = _run(v1.CreateCacheJob, FakeApi(_job(cached=1, error=1)), "edge", "img",
                       "--wait", "-f", "value", "-c", "state")
    assert (status, out) == (1, "done\n")  # shown, then the failure in the exit status


def test_api_errors_become_command_errors() -> None:
    with pytest.raises(exceptions.CommandError, match="no aggregate"):
        _run(v1.ListCacheJobs, FakeApi(_job()), "nowhere")


SCHEDULED = {**_job("scheduled"), "next_start_at": "2026-11-29T01:00:00.000000",
             "terms": {"window": {"start": "01:00", "end": "05:00", "timezone": "UTC"},
                       "priority": 80}}


def test_create_sends_every_term_option() -> None:
    api = FakeApi(_job("queued"))
    status, _ = _run(v1.CreateCacheJob, api, "edge", "img", "--not-before",
                     "2026-11-29T01:00:00Z", "--window", "22:00-05:00", "--timezone",
                     "Europe/Paris", "--deadline", "2026-11-30T05:00:00+01:00",
                     "--parallelism", "4", "--origin-downloads", "2", "--host-rate", "8M",
                     "--job-rate", "512K", "--priority", "80")
    assert status == 0
    assert api.terms == [{
        "not_before": "2026-11-29T01:00:00Z",
        "window": {"start": "22:00", "end": "05:00", "timezone": "Europe/Paris"},
        "deadline": "2026-11-30T05:00:00+01:00", "parallelism": 4, "origin_downloads": 2,
        "host_bytes_per_second": 8 * 1024 * 1024, "job_bytes_per_second": 512 * 1024,
        "priority": 80}]


def test_create_without_terms_sends_none_and_a_timezone_alone_is_refused() -> None:
    api = FakeApi(_job("queued"))
    _run(v1.CreateCacheJob, api, "edge", "img", "--window", "01:00-05:00")
    assert api.terms == [{"window": {"start": "01:00", "end": "05:00", "timezone": "UTC"}}]
    _run(v1.CreateCacheJob, api, "edge", "img")
    assert api.terms[-1] == {}
    with pytest.raises(exceptions.CommandError, match="--timezone .* --window"):
        _run(v1.CreateCacheJob, api, "edge", "img", "--timezone", "UTC")


def test_show_says_a_scheduled_job_waits_in_a_table_only() -> None:
    _, out = _run(v1.ShowCacheJob, FakeApi(SCHEDULED), "job-1")
    assert "scheduled (waiting for its window until 2026-11-29T01:00:00.000000)" in out
    assert "priority='80'" in out
    _, out = _run(v1.ShowCacheJob, FakeApi(SCHEDULED), "job-1", "-f", "json")
    shown = json.loads(out)
    assert shown["state"] == "scheduled" and shown["terms"] == SCHEDULED["terms"]
    assert shown["next_start_at"] == "2026-11-29T01:00:00.000000"
    _, out = _run(v1.ShowCacheJob, FakeApi(SCHEDULED), "job-1", "-f", "value",
                  "-c", "state", "-c", "next_start_at")
    assert out == "scheduled\n2026-11-29T01:00:00.000000\n"


def test_list_takes_formats_and_columns_and_long_shows_the_terms() -> None:
    _, out = _run(v1.ListCacheJobs, FakeApi(SCHEDULED), "edge", "-f", "value", "-c", "ID",
                  "-c", "State")
    assert out == "job-1 scheduled\n"
    _, out = _run(v1.ListCacheJobs, FakeApi(SCHEDULED), "edge", "--long", "-f", "yaml",
                  "-c", "Terms", "-c", "Next Start At")
    assert yaml.safe_load(out) == [{"Terms": SCHEDULED["terms"],
                                    "Next Start At": "2026-11-29T01:00:00.000000"}]
    _, out = _run(v1.ListCacheJobs, FakeApi(SCHEDULED), "edge")
    assert "scheduled (waiting for its window until" in out
