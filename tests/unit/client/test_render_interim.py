"""The CLI shows hosts waiting for a download slot (origin protection) and hosts pending
catch-up: in the progress bar of ``cache-images --wait``, in ``jobs show`` and its table."""

from __future__ import annotations

import io
from typing import Any

from fleetcache.client import cli, render
from fleetcache.client.api_client import ApiClient
from tests.unit.client.test_cli import FakeSession, _response

IMG_A = "a26887c6-c47b-4654-abb5-dfadf7d3f803"
IMG_B = "4d8c3732-a248-40ed-bebc-539a6ffd25c0"
LIMIT = "download slots full: max_concurrent_downloads_per_image = 1"


def _image(image_id: str, state: str, reason: str | None = None) -> dict[str, Any]:
    return {"image_id": image_id, "state": state, "reason": reason, "bytes_downloaded": 0}


def _running_job() -> dict[str, Any]:
    """c1 is done, c2 has A cached and waits for a slot for B, c3 waits for both, c4 was
    down (pending): per image, 3 cached, 3 waiting, 2 pending."""
    return {
        "id": "job-2", "aggregate_id": 7, "image_ids": [IMG_A, IMG_B], "state": "running",
        "error": None, "total_hosts": 5, "hosts_reported": 2, "bytes_downloaded": 0,
        "catch_up_until": "2026-11-25T19:00:00.000000",
        "counts": {"cached": 3, "existing": 0, "error": 0, "unsupported": 0, "skipped": 0,
                   "pending": 2, "waiting": 3},
        "started_at": "2026-11-25T18:00:00.000000", "finished_at": None,
        "hosts": [
            {"host": "c1", "bytes_downloaded": 0,
             "images": [_image(IMG_A, "cached"), _image(IMG_B, "cached")]},
            {"host": "c2", "bytes_downloaded": 0,
             "images": [_image(IMG_A, "cached"), _image(IMG_B, "waiting", LIMIT)]},
            {"host": "c3", "bytes_downloaded": 0,
             "images": [_image(IMG_A, "waiting", LIMIT), _image(IMG_B, "waiting", LIMIT)]},
            {"host": "c4", "bytes_downloaded": 0,
             "images": [_image(IMG_A, "pending", "down"), _image(IMG_B, "pending", "down")]},
        ],
    }


def test_progress_bar_shows_hosts_waiting_for_a_slot_and_pending_catch_up():
    stream = io.StringIO()
    render.ProgressBar(stream, width=10).update(_running_job())
    assert stream.getvalue() == (
        "[####......] 2/5 hosts  running  (3 cached)  2 waiting for a download slot, "
        "1 pending catch-up until 2026-11-25T19:00:00.000000\n")


def test_progress_bar_without_per_host_results_counts_hosts_from_image_counts():
    job = _running_job()
    del job["hosts"]
    job["counts"]["waiting"], job["catch_up_until"] = 4, None
    stream = io.StringIO()
    render.ProgressBar(stream, width=10).update(job)
    assert stream.getvalue().endswith(
        "(3 cached)  2 waiting for a download slot, 1 pending catch-up\n")


def test_progress_bar_of_a_plain_job_says_nothing_of_either():
    job = _running_job()
    job["hosts"] = job["hosts"][:1]
    job["counts"].update(pending=0, waiting=0)
    stream = io.StringIO()
    render.ProgressBar(stream, width=10).update(job)
    assert stream.getvalue() == "[####......] 2/5 hosts  running  (3 cached)\n"


def test_jobs_show_of_a_running_job_names_waiting_and_pending_hosts(monkeypatch, capsys):
    job = _running_job()
    base = "http://h/v2.1/os-aggregates"
    session = FakeSession({
        ("GET", f"{base}/7/images/jobs"): _response(200, {"jobs": [{"id": "job-2"}]}),
        ("GET", f"{base}/7/images/jobs/job-2"): _response(200, {"job": job}),
        ("GET", base): _response(200, {"aggregates": [{"id": 7, "uuid": "u", "name": "a"}]}),
    })
    monkeypatch.setattr(cli.ApiClient, "from_env",
                        classmethod(lambda cls, *a, **kw: ApiClient("http://h", session=session)))
    assert cli.main(["jobs", "show", "job-2", "--aggregate", "7"]) == 1  # not done yet
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("Job job-2 is running: 2/5 hosts reported, 2 waiting for a download "
                      "slot, 1 pending catch-up until 2026-11-25T19:00:00.000000")
    assert any(line.startswith(f"| c3   | waiting ({LIMIT}) |") for line in out), out
    assert any(line.startswith("| c4   | pending (down)") for line in out), out
    assert ("2 host(s) waiting for a download slot (the image service's download limit is "
            "reached): called as slots free") in out
    assert ("1 host(s) pending (2 image(s)): they were away; cached when they come back, "
            "until 2026-11-25T19:00:00.000000") in out


def _peer_job() -> dict[str, Any]:
    """c1 fetched A from the image service, c2 from its peer c1, c3 waits for a peer."""
    peer = _image(IMG_A, "cached")
    peer.update(download_path="peer", source_host="c1", bytes_downloaded=100)
    return {
        "id": "job-3", "aggregate_id": 7, "image_ids": [IMG_A], "state": "running",
        "error": None, "total_hosts": 3, "hosts_reported": 2, "bytes_downloaded": 200,
        "counts": {"cached": 2, "existing": 0, "error": 0, "unsupported": 0, "skipped": 0,
                   "pending": 0, "waiting": 1},
        "distribution": {"origin_copies": 1, "peer_copies": 1, "bytes_from_origin": 100,
                         "bytes_from_peers": 100, "offload_percent": 50.0,
                         "time_to_all_hosts": None},
        "started_at": "2026-11-25T18:00:00.000000", "finished_at": None,
        "hosts": [
            {"host": "c1", "bytes_downloaded": 100, "images": [
                {**_image(IMG_A, "cached"), "download_path": "http", "bytes_downloaded": 100}]},
            {"host": "c2", "bytes_downloaded": 100, "images": [peer]},
            {"host": "c3", "bytes_downloaded": 0,
             "images": [_image(IMG_A, "waiting", "for a peer of cell1")]},
        ],
    }


def test_a_job_with_peers_names_each_source_and_counts_the_copies():
    job = _peer_job()

    table = render.job_table(job)
    summary = render.job_summary(job)

    assert "| c2   | cached \N{LEFTWARDS ARROW} c1" in table
    assert "waiting (for a peer of cell1)" in table
    assert "Origin 1 copy (100 B), peers 1 copy (100 B), offload 50.0 %" in summary
    assert "1 host(s) waiting for a peer of their group" in summary
    assert "download slot" not in summary
    assert render.hosts_in_interim_states(job) == "1 waiting for a peer"
