"""The status page's script in a real browser (Playwright, Debian's Chromium), against the
in-process API served over HTTP: progress updated in place, a reload when a job ends, and
the Keystone sign-in form keeping a pasted token in its cookie.

The real-stack test (``tests/integration/test_status_page.py``) drives a real job; these pin
down the script's behaviour step by step, which a real job is too quick to show.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
import webob
import webtest
from oslo_config import cfg

from fleetcache.api import status_auth, status_html
from fleetcache.common.db import jobs as db_jobs
from fleetcache.common.db.session import Database
from fleetcache.image import local
from tests.browser import chromium_page
from tests.functional.api.helpers import create_aggregate


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


class _ThreadedServer(WSGIServer):
    daemon_threads = True


def _serve(app: Any) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, app, server_class=_ThreadedServer, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def served(app: webtest.TestApp) -> Iterator[str]:
    yield from _serve(app.app)


def _result(state: str, reason: str | None = None) -> db_jobs.ResultFields:
    return {"state": state, "reason": reason, "bytes_downloaded": 0}


def test_progress_advances_in_place_then_the_page_reloads_when_the_job_ends(
        served: str, app: webtest.TestApp, computes: list[str], db: Database,
        tmp_path: Any) -> None:
    aggregate = create_aggregate(app, "agg1")
    job = db_jobs.job_create(db, aggregate["id"], aggregate["uuid"], ["img"], 3, "cond1")
    db_jobs.job_set_state(db, job["uuid"], db_jobs.RUNNING)
    db_jobs.job_record_hosts(db, job["uuid"], {"c1": {"img": _result("cached")}})
    row = f'tr[data-job="{job["uuid"]}"]'
    text = f"{row} [data-field='progress-text']"
    with chromium_page() as page:
        page.goto(served + "/status")
        assert page.inner_text(text) == "1/3 hosts"
        page.evaluate("window.notReloaded = true")

        db_jobs.job_record_hosts(db, job["uuid"], {"c2": {"img": _result("existing")}})
        page.wait_for_function(
            "(sel) => document.querySelector(sel).textContent === '2/3 hosts'", arg=text,
            timeout=10_000)
        assert page.evaluate("window.notReloaded") is True  # updated in place
        assert page.get_attribute(f"{row} progress", "value") == "2"
        assert page.inner_text(f"{row} [data-field='counts']") == "1 cached, 1 existing"

        db_jobs.job_record_hosts(db, job["uuid"], {"c3": {"img": _result("error", "disk <full>")}})
        db_jobs.job_set_state(db, job["uuid"], db_jobs.DONE)
        page.wait_for_function(
            "(sel) => document.querySelector(sel)?.getAttribute('data-state') === 'done'",
            arg=row, timeout=10_000)
        assert page.evaluate("window.notReloaded") is None  # the end re-rendered the page
        assert page.inner_text("#matrix td.error .reason") == "disk <full>"
        page.screenshot(path=str(tmp_path / "status-page.png"), full_page=True)
        assert page.console_errors == []


def test_aggregates_and_images_show_by_name_with_their_ids_on_hover(
        served: str, app: webtest.TestApp, db: Database, conf: cfg.ConfigOpts,
        tmp_path: Any) -> None:
    directory = tmp_path / "images"
    directory.mkdir()
    conf.set_override("backend", "local", group="image_source")
    conf.set_override("local_directory", str(directory), group="image_source")
    image = local.add_image(str(directory), io.BytesIO(b"x" * 10), name="cirros <0.6>").id
    aggregate = create_aggregate(app, "edge-1")
    job = db_jobs.job_create(db, aggregate["id"], aggregate["uuid"], [image], 1, "cond1")
    db_jobs.job_record_hosts(db, job["uuid"], {"c1": {image: _result("cached")}})
    with chromium_page() as page:
        page.goto(served + "/status")
        row = page.locator(f'tr[data-job="{job["uuid"]}"]')
        assert row.locator("td").nth(1).inner_text() == f"edge-1 ({aggregate['id']})"
        assert row.locator("td").nth(1).get_attribute("title") == aggregate["uuid"]
        header = page.locator("#matrix thead th .image")
        assert header.inner_text() == "cirros <0.6>"  # the name as text, not markup
        assert header.get_attribute("title") == image
        assert row.locator(".image").get_attribute("title") == image
        assert page.console_errors == []


def _keystone_stand_in(environ: dict[str, Any], start_response: Any) -> Any:
    """Answers like ``auth_token`` behind the cookie step: 401 unless the token is good."""
    req = webob.Request(environ)
    if req.headers.get("X-Auth-Token") != "good-token":
        return webob.Response(status=401, json_body={"error": {"code": 401}})(
            environ, start_response)
    return webob.Response(text="<p id=ok>signed in</p>", content_type="text/html")(
        environ, start_response)


def test_sign_in_form_keeps_the_token_in_a_strict_cookie_of_the_status_path() -> None:
    for base in _serve(status_auth.StatusTokenCookie(_keystone_stand_in)):
        with chromium_page() as page:
            response = page.goto(base + "/status")
            assert response is not None and response.status == 401
            page.fill("#token", "good-token")
            page.click("button[type=submit]")
            page.wait_for_selector("#ok", timeout=10_000)
            (cookie,) = page.context.cookies()
            assert cookie["name"] == status_html.TOKEN_COOKIE
            assert cookie["value"] == "good-token"
            assert cookie["path"] == "/status" and cookie["sameSite"] == "Strict"
            assert page.console_errors == []
