"""``fleetcache cache list HOST``: its API call and its rendering (pins and pending catch-ups
shown when the API names them)."""

from __future__ import annotations

import pytest

from fleetcache.client import cli, render
from fleetcache.client.api_client import ApiClient
from tests.unit.client.test_cli import FakeSession, _response

CACHE = {
    "host": "compute1", "usage_bytes": 3 * 1024 * 1024, "image_count": 2,
    "reported_at": "2026-11-22T21:00:00.000000",
    "images": [
        {"image_id": "img-new", "size": 2 * 1024 * 1024, "last_used": "2026-11-22T20:59:00"},
        {"image_id": "img-old", "size": 1024, "last_used": "2026-11-20T10:00:00"},
    ],
}


def test_cache_list_quotes_the_host_and_prints_the_table(monkeypatch, capsys):
    session = FakeSession({("GET", "http://h/v2.1/os-hosts/a%2Fb/image-cache"):
                           _response(200, {"image_cache": {**CACHE, "host": "a/b"}})})
    monkeypatch.setattr(cli.ApiClient, "from_env",
                        classmethod(lambda cls, *a, **kw: ApiClient("http://h", session=session)))
    assert cli.main(["cache", "list", "a/b"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Image cache of a/b: 2 image(s), 3.0 MiB on disk, reported 2026-")
    assert out.index("img-new") < out.index("img-old")
    assert "2.0 MiB" in out and "Pinned" not in out and "catch-up" not in out


def test_cache_list_of_an_unknown_host_fails_with_the_apis_message(monkeypatch, capsys):
    session = FakeSession({("GET", "http://h/v2.1/os-hosts/nope/image-cache"): _response(
        404, {"itemNotFound": {"code": 404, "message": "Compute host nope could not be found."}})})
    monkeypatch.setattr(cli.ApiClient, "from_env",
                        classmethod(lambda cls, *a, **kw: ApiClient("http://h", session=session)))
    assert cli.main(["cache", "list", "nope"]) == 1
    assert "HTTP 404: Compute host nope could not be found." in capsys.readouterr().err


def test_no_report_yet():
    text = render.host_cache_table({"host": "c2", "usage_bytes": 0, "reported_at": None,
                                     "images": []})
    assert text == "Image cache of c2: 0 image(s), 0 B on disk, no report yet"


@pytest.mark.parametrize("pinned", [True, False])
def test_pins_and_pending_catch_ups_slot_in_when_the_api_names_them(pinned):
    images = [{**i, "pinned_until": None} for i in CACHE["images"]]
    if pinned:
        images[0]["pinned_until"] = "2026-12-01T00:00:00"
    text = render.host_cache_table({**CACHE, "images": images, "pending_catch_ups": [
        {"job_id": "job-9", "image_ids": ["img-x", "img-y"], "until": "2026-11-23T00:00:00"}]})
    assert ("Pinned until" in text) is pinned
    assert "2026-12-01T00:00:00" in text if pinned else True
    assert "Pending catch-up: job" in text and "img-x img-y" in text


def test_pinned_image_shows_its_pin_and_the_unpinned_one_a_dash():
    images = [{**CACHE["images"][0], "pinned_until": "2026-12-01T00:00:00"},
              {**CACHE["images"][1], "pinned_until": None}]
    text = render.host_cache_table({**CACHE, "images": images, "pending_catch_ups": []})
    [pinned] = [line for line in text.splitlines() if "| img-new " in line]
    [unpinned] = [line for line in text.splitlines() if "| img-old " in line]
    assert pinned.rstrip(" |").endswith("2026-12-01T00:00:00")
    assert unpinned.rstrip(" |").endswith("-")
    assert "Pending catch-up" not in text
