"""Unit tests of the ``fleetcache`` CLI: its API client (on a fake session) and its rendering."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import requests

from fleetcache.client import cli, render
from fleetcache.client.api_client import ApiClient, ApiError, versioned_endpoint

IMG = "a26887c6-c47b-4654-abb5-dfadf7d3f803"


def _response(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    resp = requests.Response()
    resp.status_code = status
    resp._content = b"" if body is None else json.dumps(body).encode()
    resp.headers.update(headers or {})
    return resp


class FakeSession(requests.Session):
    def __init__(self, answers: dict[tuple[str, str], Any]) -> None:
        super().__init__()
        self.answers = answers
        self.sent: list[tuple[str, str, Any, dict[str, str]]] = []

    def request(self, method: str, url: str, json: Any = None, **kwargs: Any) -> Any:  # type: ignore[override]
        self.sent.append((method, url, json, {**self.headers, **(kwargs.get("headers") or {})}))
        return self.answers[(method, url)]


def _job(state: str = "done", **counts: int) -> dict[str, Any]:
    return {
        "id": "job-1", "aggregate_id": 7, "image_ids": [IMG], "state": state, "error": None,
        "total_hosts": 3, "hosts_reported": 3, "bytes_downloaded": 2048,
        "counts": {"cached": 0, "existing": 0, "error": 0, "unsupported": 0, "skipped": 0,
                   "pending": 0, **counts},
        "started_at": "2026-11-21T04:00:00.000000", "finished_at": "2026-11-21T04:00:01.500000",
        "hosts": [
            {"host": "c1", "bytes_downloaded": 2048,
             "images": [{"image_id": IMG, "state": "cached", "reason": None,
                         "download_path": "rbd", "fallback_reason": None}]},
            {"host": "c2", "bytes_downloaded": 0,
             "images": [{"image_id": IMG, "state": "error", "reason": "MessagingTimeout: x"}]},
            {"host": "c3", "bytes_downloaded": 0,
             "images": [{"image_id": IMG, "state": "skipped", "reason": "down"}]},
        ],
    }


def test_versioned_endpoint():
    assert versioned_endpoint("http://h:1") == "http://h:1/v2.1"
    assert versioned_endpoint("http://h:1/v2.1/") == "http://h:1/v2.1"


def test_cache_images_posts_at_2_81_and_returns_the_location():
    session = FakeSession({
        ("POST", "http://h/v2.1/os-aggregates/7/images"):
            _response(202, headers={"Location": "http://h/v2.1/os-aggregates/7/images/jobs/j"}),
    })
    api = ApiClient("http://h", token="tok", session=session)
    assert api.cache_images(7, [IMG]) == "http://h/v2.1/os-aggregates/7/images/jobs/j"
    method, url, body, headers = session.sent[0]
    assert body == {"cache": [{"id": IMG}]}
    assert headers["OpenStack-API-Version"] == "compute 2.81"
    assert headers["X-Auth-Token"] == "tok"


def test_api_errors_carry_novas_message():
    session = FakeSession({("POST", "http://h/v2.1/os-aggregates/7/images"): _response(
        400, {"badRequest": {"code": 400, "message": "Image x could not be found."}})})
    with pytest.raises(ApiError) as err:
        ApiClient("http://h", session=session).cache_images(7, [IMG])
    assert str(err.value) == "HTTP 400: Image x could not be found."


def test_find_aggregate_by_id_uuid_or_name():
    aggs = {"aggregates": [{"id": 1, "uuid": "u-1", "name": "2"}, {"id": 2, "uuid": "u-2",
                                                                  "name": "edge"}]}
    session = FakeSession({("GET", "http://h/v2.1/os-aggregates"): _response(200, aggs)})
    api = ApiClient("http://h", session=session)
    assert api.find_aggregate("2")["id"] == 2  # an id wins over a name
    assert api.find_aggregate("edge")["id"] == 2
    assert api.find_aggregate("u-1")["id"] == 1
    with pytest.raises(ApiError, match="HTTP 404"):
        api.find_aggregate("nope")


def test_table_marks_errors_and_lists_their_reasons():
    text = render.job_table(_job(cached=1, error=1, skipped=1), {IMG: "cirros"})
    assert "| c1   | cached (rbd)   |    2.0 KiB |" in text
    assert "| c2   | error *        |" in text
    assert "| c3   | skipped (down) |" in text
    assert text.splitlines()[-1] == "* c2, cirros: MessagingTimeout: x"


def test_table_shows_the_download_path_and_lists_fallback_reasons():
    job = _job(cached=2)
    job["hosts"] = [
        {"host": "c1", "bytes_downloaded": 2048, "images": [
            {"image_id": IMG, "state": "cached", "reason": None, "download_path": "http",
             "fallback_reason": "fsid mismatch: rbd://a/images/x/snap is in cluster a"}]},
        {"host": "c2", "bytes_downloaded": 2048, "images": [
            {"image_id": IMG, "state": "cached", "reason": None, "download_path": "http",
             "fallback_reason": None}]},
        {"host": "c3", "bytes_downloaded": 0, "images": [
            {"image_id": IMG, "state": "existing", "reason": None, "download_path": None,
             "fallback_reason": None}]},
        {"host": "c4", "bytes_downloaded": 0, "images": [  # a compute too old to say
            {"image_id": IMG, "state": "cached", "reason": None}]},
    ]
    text = render.job_table(job, {IMG: "cirros"})
    assert "| c1   | cached (http) + |" in text
    assert "| c2   | cached          |" in text  # a plain download from the image source
    assert "| c3   | existing        |" in text
    assert "| c4   | cached          |" in text
    assert text.splitlines()[-1] == ("+ c1, cirros: over HTTP, not from Ceph: fsid mismatch: "
                                     "rbd://a/images/x/snap is in cluster a")


def test_summary_and_failure():
    job = _job(cached=1, error=1, skipped=1)
    assert render.job_summary(job) == (
        "Job job-1 on aggregate 7: done in 1.5 s, 3 hosts: 1 cached, 0 existing, 1 error, "
        "0 unsupported, 1 skipped; 2.0 KiB downloaded")
    assert render.job_failed(job)
    assert not render.job_failed(_job(cached=2, skipped=1))
    assert render.job_failed(_job(state="failed"))


def test_progress_bar_writes_a_line_per_change_off_a_terminal():
    stream = io.StringIO()
    bar = render.ProgressBar(stream, width=10)
    job = _job("running", cached=1)
    job["hosts_reported"] = 1
    bar.update(job)
    bar.update(job)
    job["hosts_reported"] = 3
    bar.update(job)
    assert stream.getvalue().splitlines() == [
        "[###.......] 1/3 hosts  running  (1 cached)",
        "[##########] 3/3 hosts  running  (1 cached)",
    ]


def _no_os_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("OS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.config/openstack/clouds.yaml
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))


def test_main_without_credentials_fails_with_a_message(monkeypatch, capsys, tmp_path):
    _no_os_env(monkeypatch, tmp_path)
    assert cli.main(["jobs", "list", "agg"]) == 1
    err = capsys.readouterr().err
    assert "cannot authenticate" in err and "--os-cloud" in err


def test_noauth_lab_endpoint_and_token_skip_keystone(monkeypatch, tmp_path):
    _no_os_env(monkeypatch, tmp_path)
    monkeypatch.setenv("OS_ENDPOINT", "http://lab:8774")
    monkeypatch.setenv("OS_TOKEN", "t0k")
    api = ApiClient.from_env()
    assert api.endpoint == "http://lab:8774/v2.1"
    assert api.session.headers["X-Auth-Token"] == "t0k" and api.token_source is None
    monkeypatch.delenv("OS_TOKEN")
    assert "X-Auth-Token" not in ApiClient.from_env().session.headers  # no OS_AUTH_URL
    monkeypatch.setenv("OS_AUTH_URL", "http://127.0.0.1:9/v3")
    monkeypatch.setenv("OS_AUTH_TYPE", "none")
    assert "X-Auth-Token" not in ApiClient.from_env().session.headers


def test_unknown_cloud_is_an_error_not_a_traceback(monkeypatch, tmp_path):
    _no_os_env(monkeypatch, tmp_path)
    (tmp_path / "clouds.yaml").write_text("clouds:\n  lab:\n    auth:\n      auth_url: x\n")
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(tmp_path / "clouds.yaml"))
    with pytest.raises(ApiError, match="cannot authenticate"):
        ApiClient.from_env(cloud="nowhere")


def test_token_source_is_asked_before_each_request():
    tokens = iter(["first", "renewed"])
    session = FakeSession({("GET", "http://api/v2.1/os-aggregates"):
                           _response(200, {"aggregates": []})})
    sent: list[str] = []
    real = session.request

    def record(method: str, url: str, json: Any = None, **kwargs: Any) -> Any:
        sent.append(kwargs["headers"]["X-Auth-Token"])
        return real(method, url, json, **kwargs)

    session.request = record  # type: ignore[method-assign]
    api = ApiClient("http://api", session=session, token_source=lambda: next(tokens))
    api.list_aggregates()
    api.list_aggregates()
    assert sent == ["first", "renewed"]


def test_main_usage_error_exits_2():
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["cache-images", "agg"])
    assert exit_info.value.code == 2
