"""The status page names aggregates (from the database) and images (from the image source, here
the local directory one), with the id beside or on hover; names are escaped; what has no name
(a deleted aggregate, an image the source does not know, an image service that does not
answer) shows as its id, and the page does not wait for the image service."""

from __future__ import annotations

import io
import pathlib
import socket
import time
from collections.abc import Iterator

import pytest
import webtest
from oslo_config import cfg

from fleetcache.api.handlers import status as status_handler
from fleetcache.common.db import jobs as db_jobs
from fleetcache.common.db.session import Database
from fleetcache.image import local
from tests.functional.api.helpers import create_aggregate

HOSTILE = '<img src=x onerror="alert(1)">'
UNKNOWN = "99999999-9999-9999-9999-999999999999"


@pytest.fixture
def images(conf: cfg.ConfigOpts, tmp_path: pathlib.Path) -> dict[str, str]:
    """name -> id of two images in a local image source."""
    directory = tmp_path / "images"
    directory.mkdir()
    conf.set_override("backend", "local", group="image_source")
    conf.set_override("local_directory", str(directory), group="image_source")
    return {name: local.add_image(str(directory), io.BytesIO(b"x" * 10), name=name).id
            for name in ("cirros", HOSTILE)}


def _job(app: webtest.TestApp, db: Database, aggregate_name: str,
         image_ids: list[str]) -> tuple[dict[str, object], db_jobs.JobDict]:
    aggregate = create_aggregate(app, aggregate_name)
    job = db_jobs.job_create(db, aggregate["id"], aggregate["uuid"], image_ids, 1, "cond1")
    db_jobs.job_record_hosts(db, job["uuid"], {"c1": {
        i: {"state": "cached", "reason": None, "bytes_downloaded": 10} for i in image_ids}})
    return aggregate, job


def test_page_names_aggregates_and_images_with_their_ids(
        app: webtest.TestApp, db: Database, images: dict[str, str]) -> None:
    cirros, hostile = images["cirros"], images[HOSTILE]
    aggregate, _ = _job(app, db, "edge-1", [cirros, hostile, UNKNOWN])
    text = app.get("/status").text
    # the aggregate's name, its id beside, its uuid on hover
    assert (f'<td title="{aggregate["uuid"]}"><span class="aggregate">edge-1</span> '
            f'<span class="muted">({aggregate["id"]})</span></td>') in text
    # an image's name with its id on hover, in the jobs table and as the matrix's column
    named = f'<span class="image" title="{cirros}">cirros</span>'
    assert text.count(named) == 2
    # a name from the image service is escaped like everything else
    assert (f'<span class="image" title="{hostile}">&lt;img src=x onerror=&quot;alert(1)'
            f'&quot;&gt;</span>') in text
    assert HOSTILE not in text
    # an image the source does not know shows as its id
    assert text.count(f'<code class="image">{UNKNOWN}</code>') == 2


def test_a_deleted_aggregate_shows_as_its_id(
        app: webtest.TestApp, db: Database, images: dict[str, str]) -> None:
    aggregate, _ = _job(app, db, "gone", [images["cirros"]])
    app.delete(f"/v2.1/os-aggregates/{aggregate['id']}")
    text = app.get("/status").text
    assert f'<td title="deleted aggregate {aggregate["uuid"]}">{aggregate["id"]}</td>' in text
    assert "gone" not in text


@pytest.fixture
def silent_glance(conf: cfg.ConfigOpts) -> Iterator[None]:
    """A Glance that takes connections and never answers (a hung image service)."""
    listener = socket.create_server(("127.0.0.1", 0))
    conf.set_override("backend", "glance", group="image_source")
    conf.set_override("api_servers", [f"http://127.0.0.1:{listener.getsockname()[1]}"],
                      group="glance")
    conf.set_override("num_retries", 0, group="glance")
    yield
    listener.close()  # resets the connections waiting in its backlog: the lookups end


def test_an_image_service_that_does_not_answer_costs_the_page_its_wait_only(
        app: webtest.TestApp, db: Database, silent_glance: None) -> None:
    image = "11111111-2222-3333-4444-555555555555"
    _job(app, db, "edge-1", [image])
    for _ in range(2):  # the second render finds the lookup still in flight
        started = time.monotonic()
        text = app.get("/status").text
        elapsed = time.monotonic() - started
        # it did wait (the lookup hangs, it did not fail at once), and no longer than that
        assert status_handler.IMAGE_NAME_WAIT * 0.9 <= elapsed, elapsed
        assert elapsed < status_handler.IMAGE_NAME_WAIT + 2, elapsed
        assert text.count(f'<code class="image">{image}</code>') == 2
        assert '<span class="aggregate">edge-1</span>' in text  # the database still names it
