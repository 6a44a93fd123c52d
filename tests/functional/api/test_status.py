"""``/status`` (HTML) and ``/status/progress``: admin-only, escaped, under a strict CSP."""

from __future__ import annotations

import base64
import datetime
import hashlib
import re
import time

import pytest
import webob
import webtest

from fleetcache.api import status_auth, status_html
from fleetcache.common.db import host_images, models
from fleetcache.common.db import jobs as db_jobs
from fleetcache.common.db.session import Database
from tests.functional.api.helpers import LATEST, MEMBER, create_aggregate, fault

HOSTILE = '<img src=x onerror="alert(1)">'


@pytest.fixture
def job(app: webtest.TestApp, computes: list[str], db: Database) -> db_jobs.JobDict:
    aggregate = create_aggregate(app, "agg1")
    for host in computes:
        app.post_json(f"/v2.1/os-aggregates/{aggregate['id']}/action",
                      {"add_host": {"host": host}})
    created = db_jobs.job_create(db, aggregate["id"], aggregate["uuid"],
                                 ["img-a", HOSTILE], len(computes), "cond1")
    db_jobs.job_set_state(db, created["uuid"], db_jobs.RUNNING)
    db_jobs.job_record_hosts(db, created["uuid"], {
        "c1": {"img-a": {"state": "cached", "reason": None, "bytes_downloaded": 1024},
               HOSTILE: {"state": "error", "reason": "checksum </td><script>x</script>",
                         "bytes_downloaded": 0}},
    })
    return created


def test_page_shows_jobs_matrix_reasons_and_caches_escaped(
    app: webtest.TestApp, job: db_jobs.JobDict, db: Database
) -> None:
    host_images.set_host_images(db, "c1", [{"image_id": "img-a", "size": 4096,
                                            "last_used": time.time()}], 8192)
    page = app.get("/status")
    assert page.content_type == "text/html"
    text = page.text
    assert f'data-job="{job["uuid"]}"' in text
    assert "1/3 hosts" in text
    assert "checksum &lt;/td&gt;&lt;script&gt;x&lt;/script&gt;" in text
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in text
    assert HOSTILE not in text and "<script>x" not in text
    assert re.search(r"<th>c1</th><td class=\"num\">1</td><td class=\"num\">8.0 KiB", text)
    # exactly one script, the page's own
    assert text.count("<script>") == 1


def test_page_says_how_much_came_from_peers(
    app: webtest.TestApp, job: db_jobs.JobDict, db: Database
) -> None:
    assert "from peers" not in app.get("/status").text
    db_jobs.job_record_hosts(db, job["uuid"], {"c2": {"img-a": db_jobs.ResultFields(
        state="cached", reason=None, bytes_downloaded=3072, download_path="peer",
        source_host="c1", bytes_from_peers=3072)}})

    text = app.get("/status").text

    assert "4.0 KiB (75.0 % from peers, 1 copy from the image service)" in text


def test_a_scheduled_job_says_when_it_starts(
    app: webtest.TestApp, job: db_jobs.JobDict, db: Database
) -> None:
    with db.transaction() as session:
        row = session.query(models.CacheJob).filter_by(uuid=job["uuid"]).one()
        row.state = db_jobs.SCHEDULED
        row.next_start_at = datetime.datetime(2026, 12, 1, 1, 0)
    text = app.get("/status").text
    assert '<td class="scheduled" data-field="state">scheduled</td>' in text
    assert "waiting for its window until 2026-12-01T01:00:00.000000" in text
    progress = app.get("/status/progress").json["jobs"]
    assert progress[0]["state"] == "scheduled"


def test_csp_allows_only_the_inline_script_and_style_by_hash(
    app: webtest.TestApp, job: db_jobs.JobDict
) -> None:
    page = app.get("/status")
    csp = page.headers["Content-Security-Policy"]
    script = re.search(r"<script>(.*)</script>", page.text, re.S)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp
    assert page.headers["Cache-Control"] == "no-store"
    assert page.headers["X-Content-Type-Options"] == "nosniff"


def test_progress_feed_counts_without_loading_results(
    app: webtest.TestApp, job: db_jobs.JobDict
) -> None:
    body = app.get("/status/progress").json
    assert body["jobs"] == [{"id": job["uuid"], "state": "running", "total_hosts": 3,
                             "hosts_reported": 1,
                             "counts": {"cached": 1, "existing": 0, "error": 1,
                                        "unsupported": 0, "skipped": 0, "pending": 0,
                                        "waiting": 0}}]


@pytest.mark.parametrize("path", ["/status", "/status/progress"])
def test_non_admin_is_forbidden(app: webtest.TestApp, path: str) -> None:
    response = app.get(path, headers=MEMBER, status=403)
    fault(response, "forbidden", 403)


def test_empty_page(app: webtest.TestApp) -> None:
    text = app.get("/status", headers=LATEST).text
    assert "No pre-cache job yet." in text
    assert "No compute has reported its image cache yet." in text


def _echo_token(environ: dict[str, object], start_response: object) -> object:
    req = webob.Request(environ)
    if req.headers.get("X-Auth-Token") != "good":
        return webob.Response(status=401, json_body={"error": "no"})(environ, start_response)
    return webob.Response(text="ok")(environ, start_response)


def test_cookie_becomes_the_token_on_status_paths_only() -> None:
    app = webtest.TestApp(status_auth.StatusTokenCookie(_echo_token))
    app.set_cookie(status_html.TOKEN_COOKIE, "good")
    assert app.get("/status").text == "ok"
    assert app.get("/status/progress").text == "ok"
    app.get("/v2.1/os-aggregates", status=401)
    app.post("/status", status=401)


def test_refused_page_is_the_sign_in_form_a_header_wins_over_the_cookie() -> None:
    app = webtest.TestApp(status_auth.StatusTokenCookie(_echo_token))
    page = app.get("/status", status=401)
    assert page.content_type == "text/html"
    assert 'id="token-form"' in page.text
    assert "Content-Security-Policy" in page.headers
    app.set_cookie(status_html.TOKEN_COOKIE, "stale")
    assert "refused" in app.get("/status", status=401).text
    assert app.get("/status", headers={"X-Auth-Token": "good"}).text == "ok"
    # the feed answers the JSON 401 the script reports
    assert app.get("/status/progress", status=401).content_type == "application/json"
