"""``fleetcache ... -f json|yaml`` (the API's objects, for scripts) and ``cache-images
--pin-seconds`` (the body's key, checked for its form before any request, the API's 400 passed
on), on a fake HTTP session."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from fleetcache.api.schemas import aggregate_images as api_schema
from fleetcache.client import api_client, cli
from fleetcache.client.api_client import ApiClient
from tests.unit.client.test_cli import IMG, FakeSession, _job, _response
from tests.unit.client.test_cli_cache import CACHE

BASE = "http://h/v2.1"
JOB_URL = f"{BASE}/os-aggregates/7/images/jobs/job-1"
AGGREGATES = {"aggregates": [{"id": 7, "uuid": "u-7", "name": "edge"}]}


def _cli(monkeypatch: pytest.MonkeyPatch, answers: dict[tuple[str, str], Any],
         *argv: str) -> tuple[int, FakeSession]:
    session = FakeSession({("GET", f"{BASE}/os-aggregates"): _response(200, AGGREGATES),
                           **answers})
    monkeypatch.setattr(cli.ApiClient, "from_env",
                        classmethod(lambda cls, *a, **kw: ApiClient("http://h", session=session)))
    return cli.main(list(argv)), session


def _posted(job: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {("POST", f"{BASE}/os-aggregates/7/images"):
            _response(202, headers={"Location": JOB_URL}),
            ("GET", JOB_URL): _response(200, {"job": job})}


def test_jobs_show_json_prints_the_apis_job_and_keeps_the_exit_status(monkeypatch, capsys):
    job = {**_job(cached=1, error=1, skipped=1), "links": [{"rel": "self", "href": JOB_URL}]}
    answers = {("GET", f"{BASE}/os-aggregates/7/images/jobs"): _response(200, {"jobs": [job]}),
               ("GET", JOB_URL): _response(200, {"job": job})}
    status, _ = _cli(monkeypatch, answers, "jobs", "show", "job-1", "--aggregate", "edge",
                     "-f", "json")
    out = capsys.readouterr().out
    assert json.loads(out) == job  # every key as the API answered, nothing else on stdout
    assert status == 1  # an image errored, as with the table


def test_jobs_show_yaml_and_list_json(monkeypatch, capsys):
    job = _job(cached=3, state="running")
    summary = {k: v for k, v in job.items() if k != "hosts"}
    answers = {("GET", f"{BASE}/os-aggregates/7/images/jobs"): _response(200, {"jobs": [summary]}),
               ("GET", JOB_URL): _response(200, {"job": job})}
    status, _ = _cli(monkeypatch, answers, "jobs", "show", "job-1", "--format", "yaml")
    shown = yaml.safe_load(capsys.readouterr().out)  # no "Job ... is running" line before it
    assert status == 1 and shown["state"] == "running"  # not over: as with the table
    assert [h["host"] for h in shown["hosts"]] == ["c1", "c2", "c3"]
    status, _ = _cli(monkeypatch, answers, "jobs", "list", "edge", "-f", "json")
    assert status == 0 and json.loads(capsys.readouterr().out) == [summary]


def test_cache_list_json(monkeypatch, capsys):
    answers = {("GET", f"{BASE}/os-hosts/compute1/image-cache"):
               _response(200, {"image_cache": CACHE})}
    assert _cli(monkeypatch, answers, "cache", "list", "compute1", "-f", "json")[0] == 0
    assert json.loads(capsys.readouterr().out) == CACHE


def test_cache_images_sends_the_pin_and_prints_the_job_as_json(monkeypatch, capsys):
    job = {**_job("queued"), "pin_until": "2026-11-22T04:00:00.000000"}
    status, session = _cli(monkeypatch, _posted(job), "cache-images", "edge", IMG,
                           "--pin-seconds", "86400", "-f", "json")
    assert status == 0
    assert json.loads(capsys.readouterr().out)["pin_until"] == "2026-11-22T04:00:00.000000"
    (post,) = [s for s in session.sent if s[0] == "POST"]
    assert post[2] == {"cache": [{"id": IMG}], "fleetcache:pin_seconds": 86400}


def test_cache_images_without_a_pin_sends_novas_body(monkeypatch, capsys):
    status, session = _cli(monkeypatch, _posted(_job("queued")), "cache-images", "edge", IMG)
    assert status == 0 and "queued on aggregate edge (7)" in capsys.readouterr().out
    (post,) = [s for s in session.sent if s[0] == "POST"]
    assert post[2] == {"cache": [{"id": IMG}]}


def test_cache_images_wait_json_ends_with_the_job_and_fails_on_errors(monkeypatch, capsys):
    status, _ = _cli(monkeypatch, _posted(_job(cached=2, error=1)), "cache-images", "edge",
                     IMG, "--wait", "-f", "json")
    captured = capsys.readouterr()
    assert status == 1 and json.loads(captured.out)["counts"]["error"] == 1
    assert "3/3 hosts" in captured.err  # the progress bar stays off stdout


@pytest.mark.parametrize(("value", "message"), [
    ("1d", "'1d' is not a whole number of seconds (a day is 86400)"),
    ("1.5", "'1.5' is not a whole number of seconds"),
    ("0", "0 is not a positive number of seconds"),
])
def test_a_malformed_pin_is_a_usage_error_naming_the_option(monkeypatch, capsys, value,
                                                             message):
    with pytest.raises(SystemExit) as exit_info:
        _cli(monkeypatch, {}, "cache-images", "edge", IMG, "--pin-seconds", value)
    assert exit_info.value.code == 2
    assert f"argument --pin-seconds: {message}" in capsys.readouterr().err


def test_the_apis_400_on_a_pin_too_long_is_passed_on(monkeypatch, capsys):
    refusal = _response(400, {"badRequest": {"code": 400, "message": (
        "Invalid input for field/attribute fleetcache:pin_seconds. Value: 99999999. "
        "99999999 is greater than the maximum of 31622400")}})
    status, _ = _cli(monkeypatch, {("POST", f"{BASE}/os-aggregates/7/images"): refusal},
                     "cache-images", "edge", IMG, "--pin-seconds", "99999999")
    assert status == 1
    assert capsys.readouterr().err == (
        "fleetcache: HTTP 400: Invalid input for field/attribute fleetcache:pin_seconds. "
        "Value: 99999999. 99999999 is greater than the maximum of 31622400\n")


def test_the_clients_pin_key_is_the_apis() -> None:
    """The client imports nothing of the API, so the key is written in both: they agree."""
    assert api_client.PIN_KEY == api_schema.PIN_KEY


def test_cache_images_sends_the_terms_at_fleetcache_1_1(monkeypatch, capsys):
    job = {**_job("scheduled"), "next_start_at": "2026-11-29T01:00:00.000000",
           "terms": {"window": {"start": "22:00", "end": "05:00", "timezone": "UTC"}}}
    status, session = _cli(monkeypatch, _posted(job), "cache-images", "edge", IMG,
                           "--window", "22:00-05:00", "--host-rate", "8M", "--priority", "70",
                           "--pin-seconds", "60", "-f", "json")
    assert status == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["state"] == "scheduled" and shown["terms"] == job["terms"]
    (post,) = [s for s in session.sent if s[0] == "POST"]
    assert post[2] == {"cache": [{"id": IMG}], "fleetcache:pin_seconds": 60,
                       "fleetcache:window": {"start": "22:00", "end": "05:00",
                                             "timezone": "UTC"},
                       "fleetcache:host_bytes_per_second": 8 * 1024 * 1024,
                       "fleetcache:priority": 70}
    assert post[3]["OpenStack-API-Version"] == "compute 2.81, fleetcache 1.1"
    # The next request is back at plain 2.81: the header was the post's alone.
    (get,) = [s for s in session.sent if s[0] == "GET" and s[1] == JOB_URL]
    assert get[3]["OpenStack-API-Version"] == "compute 2.81"


def test_cache_images_without_terms_asks_no_fleetcache_version(monkeypatch, capsys):
    _, session = _cli(monkeypatch, _posted(_job("queued")), "cache-images", "edge", IMG,
                      "--pin-seconds", "60")
    (post,) = [s for s in session.sent if s[0] == "POST"]
    assert post[3]["OpenStack-API-Version"] == "compute 2.81"


def test_a_timezone_without_a_window_is_a_usage_error(monkeypatch, capsys):
    status, session = _cli(monkeypatch, {}, "cache-images", "edge", IMG, "--timezone", "UTC")
    assert status == 2 and session.sent == []
    assert "--timezone" in capsys.readouterr().err


def test_a_scheduled_job_says_until_when_it_waits_and_shows_its_terms(monkeypatch, capsys):
    job = {**_job("scheduled"), "next_start_at": "2026-11-29T01:00:00.000000",
           "terms": {"window": {"start": "22:00", "end": "05:00", "timezone": "UTC"},
                     "host_bytes_per_second": 8 * 1024 * 1024, "priority": 70}}
    status, _ = _cli(monkeypatch, {("GET", f"{BASE}/os-aggregates/7/images/jobs"):
                                   _response(200, {"jobs": [job]}),
                                   ("GET", JOB_URL): _response(200, {"job": job})},
                     "jobs", "show", "job-1", "--aggregate", "edge")
    out = capsys.readouterr().out
    assert status == 1  # not over yet
    assert "Job job-1 is scheduled (waiting for its window until 2026-11-29T01:00:00" in out
    assert "Terms: window 22:00-05:00 UTC, host rate 8.0 MiB/s, priority 70" in out
    _cli(monkeypatch, {("GET", f"{BASE}/os-aggregates/7/images/jobs"):
                       _response(200, {"jobs": [job]})}, "jobs", "list", "edge", "-f", "json")
    assert json.loads(capsys.readouterr().out)[0]["next_start_at"] == job["next_start_at"]


def test_the_clients_terms_are_the_apis() -> None:
    from fleetcache.client import options
    from fleetcache.common import job_terms

    assert api_client.TERMS_PREFIX == api_schema.TERM_PREFIX
    parser = __import__("argparse").ArgumentParser()
    options.add_terms_options(parser)
    every = options.terms_from_args(parser.parse_args([
        "--not-before", "2026-11-29T01:00:00Z", "--window", "01:00-02:00", "--deadline",
        "2026-11-30T01:00:00Z", "--parallelism", "1", "--origin-downloads", "1",
        "--host-rate", "1M", "--job-rate", "1M", "--priority", "1"]))
    assert tuple(every) == job_terms.KEYS
