"""The status page in a real browser (Playwright, Debian's Chromium) on the real stack.

A job over the three computes is held back by freezing compute3 (SIGSTOP of its process
group: its RPC call waits in RabbitMQ), so the page first shows it running with two hosts of
three (after signing in with the admin's Keystone token pasted into the page's form);
compute3 is then thawed and the page, without the test reloading it, follows the job to
``done``. One image of the job is a qcow2 declared ``raw`` (Glance accepts it; every
compute's format inspection refuses it), so the matrix shows an error with its reason. The
page names the aggregate and the images (their names in Glance), with the ids on hover.

Screenshots: ``<stack>/log/status-page-running.png`` and ``status-page-done.png`` (the stack's
log directory, kept until the next ``tools/stack.sh up``), and the same files in the test's
``tmp_path``.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests import hostile_images
from tests.browser import chromium_page
from tests.integration.stackops import MV, frozen, get_job
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

HOSTS = ("compute1", "compute2", "compute3")
FROZEN = "compute3"


def upload_image(stack: Any, path: Path, disk_format: str) -> str:
    """A new image in the stack's Glance (file store). :returns: its id."""
    resp = stack.glance.post(f"{stack.glance_url}/v2/images", timeout=30, json={
        "name": f"it-status-{uuid.uuid4().hex[:8]}", "disk_format": disk_format,
        "container_format": "bare"})
    resp.raise_for_status()
    image_id: str = resp.json()["id"]
    stack.glance.put(f"{stack.glance_url}/v2/images/{image_id}/file", data=path.read_bytes(),
                     headers={"Content-Type": "application/octet-stream"},
                     timeout=120).raise_for_status()
    return image_id


@pytest.fixture
def mislabelled_image(stack: Any, tmp_path: Path) -> Iterator[str]:
    """A qcow2 declared ``raw``: Glance takes it, fleetcache's format inspection refuses it."""
    image_id = upload_image(stack, hostile_images.qcow2(tmp_path, size="1M"), "raw")
    yield image_id
    stack.glance.delete(f"{stack.glance_url}/v2/images/{image_id}", timeout=30)


def _screenshot(page: Any, stack: Any, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    shutil.copy(path, stack.dir / "log" / name)


def test_page_follows_a_running_job_to_its_end_and_shows_an_error_reason(
        stack: Any, make_aggregate: Any, mislabelled_image: str, tmp_path: Path) -> None:
    aggregate = make_aggregate(hosts=HOSTS)
    good = stack.sample_images[0]
    status_url = stack.api_url.rsplit("/v2.1", 1)[0] + "/status"
    with chromium_page() as page:
        with frozen(stack, FROZEN):
            resp = stack.api_request("POST", f"os-aggregates/{aggregate['id']}/images",
                                     microversion=MV,
                                     json={"cache": [{"id": good}, {"id": mislabelled_image}]})
            assert resp.status_code == 202, resp.text
            job_id = resp.headers["Location"].rsplit("/", 1)[-1]
            wait_for(lambda: get_job(stack, aggregate["id"], job_id)["hosts_reported"] == 2,
                     "the two live computes to answer", 60)

            signed_out = page.goto(status_url)  # Keystone: the sign-in form first
            assert signed_out is not None and signed_out.status == 401
            page.fill("#token", stack.token("admin"))
            page.click("button[type=submit]")
            page.wait_for_selector(f'tr[data-job="{job_id}"]', timeout=10_000)
            response = page.reload()  # the token now rides in the page's cookie
            assert response is not None and response.status == 200
            assert "default-src 'none'" in response.headers["content-security-policy"]
            row = page.locator(f'tr[data-job="{job_id}"]')
            assert row.get_attribute("data-state") == "running"
            assert row.locator("[data-field='progress-text']").inner_text() == "2/3 hosts"
            _screenshot(page, stack, tmp_path, "status-page-running.png")
        # compute3 thawed: its call goes on; the page follows by itself
        page.wait_for_function(
            """(id) => { const r = document.querySelector(`tr[data-job="${id}"]`);
                         return r && r.getAttribute('data-state') === 'done'
                             && r.querySelector("[data-field='progress-text']").textContent
                                === '3/3 hosts'; }""",
            arg=job_id, timeout=60_000)

        # aggregates and images by name (Glance's, through the API), the ids on hover
        cell = page.locator(f'tr[data-job="{job_id}"] td').nth(1)
        assert cell.inner_text() == f"{aggregate['name']} ({aggregate['id']})"
        for image_id in (good, mislabelled_image):
            name = stack.glance.get(f"{stack.glance_url}/v2/images/{image_id}",
                                    timeout=30).json()["name"]
            header = page.locator(f'#matrix thead th .image[title="{image_id}"]')
            assert header.inner_text() == name

        matrix = page.locator("#matrix")
        for host in HOSTS:
            assert matrix.locator("tr", has=page.locator("th", has_text=host)).count() == 1
        reason = matrix.locator("td.error .reason").first
        assert reason.is_visible()
        assert "format inspection" in reason.inner_text()
        page.wait_for_function(  # the reloaded page polls the feed too
            "() => document.getElementById('poll-status').textContent.startsWith('updated')",
            timeout=10_000)
        _screenshot(page, stack, tmp_path, "status-page-done.png")
        assert page.console_errors == []

    job = get_job(stack, aggregate["id"], job_id)
    assert job["state"] == "done" and job["counts"]["error"] == 3


def test_status_paths_are_admin_only(stack: Any) -> None:
    root = stack.api_url.rsplit("/v2.1", 1)[0]
    for path in ("/status", "/status/progress"):
        resp = requests.get(root + path, timeout=30,
                            headers={"X-Auth-Token": stack.token("member")})
        assert resp.status_code == 403, resp.text
        assert resp.json()["forbidden"]["code"] == 403
        assert requests.get(root + path, timeout=30).status_code == 401
