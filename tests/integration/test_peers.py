"""Peer distribution on the real stack (issue 22, "One copy per site"): real Glance behind
Keystone, RabbitMQ, the three computes in two cells (compute1 and compute2 in cell1,
compute3 in cell2), each serving its cache to peers (``tools/stack.sh``: ``peer_distribution``
on, ``peer_listen_port`` 18801-18803).

* With the conductor's ``peer_distribution`` on, a job over the three computes makes exactly
  one image-data GET on Glance per cell (its access log); the other host of cell1 names its
  peer, and every copy is Glance's bytes.
* Playing the conductor over the bus (compute RPC 1.4): a peer that serves flipped bytes (a
  test double) is caught by the receiver's verification, nothing of it published, the image
  fetched from Glance and the liar named (at 1.6, on the conductor's ask, given back
  without a Glance GET); a peer that dies mid-transfer is resumed from the
  next peer with ``Range`` (at 1.7, when it was the last, the image is given back with its
  bytes kept, and the next call resumes them from Glance); a credential for another job,
  image or server, a path instead of an image id, or no credential: refused by the
  compute's image server, nothing served.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from oslo_config import cfg

from fleetcache.common import config, peer_tokens, rpc
from fleetcache.common.context import RequestContext
from fleetcache.compute.peers.http_wire import NOT_CACHED_HEADER
from fleetcache.compute.rpcapi import ComputeAPI, Peer
from tests.integration.stackops import (
    MV,
    cached_file,
    file_gets,
    file_sha512,
    forget,
    sha512_image,
    wait_job_done,
)
from tests.integration.test_metrics import scrape, value

pytestmark = pytest.mark.integration

IMAGE_MIB = 24
CELL1 = ("compute1", "compute2")
PEERS_ON = "[image_cache]\npeer_distribution = true\nprecache_concurrency = 3\n"


@pytest.fixture
def image(stack: Any) -> Iterator[dict[str, Any]]:
    """A new raw image of IMAGE_MIB random MiB in Glance (no compute has it), deleted with
    its cached copies after the test. :returns: Glance's record, plus ``data``."""
    with sha512_image(stack, IMAGE_MIB, "it-peers") as body:
        yield body


def test_a_job_fetches_one_copy_per_cell_from_glance_the_rest_from_peers(
        stack, make_aggregate, image):
    aggregate = make_aggregate(hosts=("compute1", "compute2", "compute3"))
    with stack.conductor_options("peers", PEERS_ON):
        resp = stack.api_request("POST", f"os-aggregates/{aggregate['id']}/images",
                                 microversion=MV, json={"cache": [{"id": image["id"]}]})
        assert resp.status_code == 202, resp.text
        job = wait_job_done(stack, aggregate["id"], resp.headers["Location"].rsplit("/", 1)[-1],
                            timeout=300)
        # The conductor restarted with peers on: its counters hold this job alone.
        metrics = scrape(stack.env["FLEETCACHE_METRICS_CONDUCTOR"])

    assert job["state"] == "done", job
    results = {h["host"]: h["images"][0] for h in job["hosts"]}
    assert {r["state"] for r in results.values()} == {"cached"}, results
    for host in results:
        assert file_sha512(cached_file(stack, host, image["id"])) == image["os_hash_value"]
    assert len(file_gets(stack, image["id"], at_least=2)) == 2  # one per cell
    from_peer = [h for h, r in results.items() if r["download_path"] == "peer"]
    assert len(from_peer) == 1 and from_peer[0] in CELL1, results
    peer_result = results[from_peer[0]]
    assert peer_result["source_host"] == next(h for h in CELL1 if h != from_peer[0])
    assert peer_result["bytes_from_peers"] == image["size"]
    assert results["compute3"]["download_path"] == "http"
    assert job["distribution"]["origin_copies"] == 2
    assert job["distribution"]["peer_copies"] == 1
    assert job["distribution"]["bytes_from_peers"] == image["size"]
    assert job["distribution"]["time_to_all_hosts"] > 0
    group_bytes = "fleetcache_conductor_group_download_bytes_total"
    assert value(metrics, group_bytes, group="cell1", source="origin") == image["size"]
    assert value(metrics, group_bytes, group="cell1", source="peer") == image["size"]
    assert value(metrics, group_bytes, group="cell2", source="origin") == image["size"]
    assert value(metrics, group_bytes, group="cell2", source="peer") == 0


# -- playing the conductor ------------------------------------------------------------------


@pytest.fixture
def cell1(stack: Any) -> Iterator[ComputeAPI]:
    """A compute RPC client on cell1's broker (compute1's own configuration)."""
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([], project="fleetcache-it",
         default_config_files=[str(stack.dir / "etc" / "compute1.conf")],
         default_config_dirs=[])
    transports = rpc.Transports(conf)
    try:
        yield ComputeAPI(conf, transports.get())
    finally:
        transports.cleanup()


def _ctxt() -> RequestContext:
    return RequestContext(is_admin=True, roles=["admin"], overwrite=False,
                          global_request_id=f"req-{uuid.uuid4()}")


def _site(stack: Any, host: str) -> tuple[str, str | None]:
    """The image server's URL and the address the stack registered for ``host``."""
    service = stack.service(host)
    return service["capabilities"]["peer"]["url"], service["host_ip"]


class Granted:
    """compute1 serving the image to a job this test made up, with its own key."""

    def __init__(self, stack: Any, client: ComputeAPI, image_id: str) -> None:
        self.job, self.key, self.image_id = str(uuid.uuid4()), peer_tokens.new_key(), image_id
        self.until = time.time() + 600
        served = client.serve_images(_ctxt(), "compute1", self.job, self.key, [image_id],
                                     self.until)
        assert served == [image_id]
        self.url, _ = _site(stack, "compute1")
        _, self.compute2_ip = _site(stack, "compute2")

    def authorization(self, **claims: Any) -> str:
        made = {"job": self.job, "image_id": self.image_id, "requester": "compute2",
                "requester_ip": self.compute2_ip, "server": "compute1",
                "expires": self.until, **claims}
        key = made.pop("key", self.key)
        return peer_tokens.mint(key, peer_tokens.PeerClaims(**made))

    def peer(self) -> Peer:
        return Peer(host="compute1", url=self.url, authorization=self.authorization())


def _cache_on(stack: Any, client: ComputeAPI, host: str, image_id: str,
              peers: list[Peer]) -> dict[str, Any]:
    forget_on(stack, host, image_id)
    reply = client.cache_images(_ctxt(), host, [image_id], peers={image_id: peers})
    result: dict[str, Any] = reply[image_id]
    return result


def forget_on(stack: Any, host: str, image_id: str) -> None:
    cached_file(stack, host, image_id).unlink(missing_ok=True)


@contextlib.contextmanager
def double(serve: Any) -> Iterator[str]:
    """A test double of a peer's image server on the machine's address (so that compute2
    can reach it): ``serve(handler, start)`` answers each GET. :returns: its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            match = re.match(r"bytes=(\d+)-", self.headers.get("Range") or "")
            serve(self, int(match.group(1)) if match else 0)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _send(handler: Any, data: bytes, start: int, total: int) -> None:
    handler.send_response(206 if start else 200)
    handler.send_header("Content-Type", "application/octet-stream")
    handler.send_header("Content-Length", str(total - start))
    if start:
        handler.send_header("Content-Range", f"bytes {start}-{total - 1}/{total}")
    handler.end_headers()
    handler.wfile.write(data)


def test_flipped_bytes_from_a_peer_are_never_published(stack, cell1, image):
    data = bytearray(image["data"])
    data[len(data) // 2] ^= 0xFF
    before = len(file_gets(stack, image["id"]))

    with double(lambda h, start: _send(h, bytes(data[start:]), start, len(data))) as url:
        result = _cache_on(stack, cell1, "compute2", image["id"],
                           [Peer(host="liar", url=url, authorization="FleetcachePeer x.y")])

    assert result["state"] == "cached" and result["download_path"] == "http", result
    assert result["bad_peers"] == ["liar"]
    assert file_sha512(cached_file(stack, "compute2", image["id"])) == image["os_hash_value"]
    assert len(file_gets(stack, image["id"], at_least=before + 1)) == before + 1


def test_flipped_bytes_are_given_back_to_a_conductor_of_1_6(stack, cell1, image):
    """Compute RPC 1.6: the conductor names the next source, so the compute drops the bytes
    and asks Glance nothing (a chain of cut-through relays would each fetch a copy)."""
    data = bytearray(image["data"])
    data[len(data) // 2] ^= 0xFF
    before = len(file_gets(stack, image["id"]))
    forget_on(stack, "compute2", image["id"])

    with double(lambda h, start: _send(h, bytes(data[start:]), start, len(data))) as url:
        peer = Peer(host="liar", url=url, authorization="FleetcachePeer x.y")
        result = cell1.cache_images(_ctxt(), "compute2", [image["id"]],
                                    peers={image["id"]: [peer]},
                                    origin_after_refused_peers=False)[image["id"]]

    assert (result["state"], result["bad_peers"], result["fallback_reason"]) == (
        "error", ["liar"], "hash_mismatch: liar"), result
    assert result["bytes_from_peers"] == image["size"]
    assert not cached_file(stack, "compute2", image["id"]).exists()
    assert len(file_gets(stack, image["id"])) == before  # nothing from Glance


def test_a_dead_peer_gives_the_image_back_to_a_conductor_of_1_7_its_bytes_kept(
        stack, cell1, image):
    """Compute RPC 1.7: every peer failed and the conductor names the next source, so the
    compute asks Glance nothing and keeps what the peer sent; the next call (the image
    service, as the planner would name it) resumes there: one ranged GET of the rest."""
    half = len(image["data"]) // 2
    before = len(file_gets(stack, image["id"]))
    forget_on(stack, "compute2", image["id"])

    def dies(handler: Any, start: int) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(image["data"])))
        handler.end_headers()
        if not start:
            handler.wfile.write(image["data"][:half])
            handler.wfile.flush()
        handler.connection.shutdown(2)  # the source dies half way, then sends nothing

    with double(dies) as url:
        peer = Peer(host="dying", url=url, authorization="FleetcachePeer x.y")
        result = cell1.cache_images(_ctxt(), "compute2", [image["id"]],
                                    peers={image["id"]: [peer]},
                                    origin_after_failed_peers=False)[image["id"]]

    assert (result["state"], result["download_path"], result["failed_peers"]) == (
        "error", "peer", ["dying"]), result
    assert result["fallback_reason"].startswith("peer_failed: dying: ")
    kept = result["bytes_downloaded"]
    assert half - (1 << 20) <= kept <= half and result["bytes_from_peers"] == kept
    assert not cached_file(stack, "compute2", image["id"]).exists()
    assert len(file_gets(stack, image["id"])) == before  # nothing from Glance

    again = cell1.cache_images(_ctxt(), "compute2", [image["id"]])[image["id"]]
    assert (again["state"], again["download_path"]) == ("cached", "http"), again
    assert (again["bytes_resumed"], again["bytes_downloaded"]) == (kept, image["size"] - kept)
    gets = file_gets(stack, image["id"], at_least=before + 1)
    assert len(gets) == before + 1
    assert (gets[-1].status, gets[-1].size) == (206, image["size"] - kept)
    assert file_sha512(cached_file(stack, "compute2", image["id"])) == image["os_hash_value"]


def test_a_peer_that_dies_mid_transfer_is_resumed_from_the_next_with_range(
        stack, cell1, image):
    forget(stack, image["id"])
    first = cell1.cache_images(_ctxt(), "compute1", [image["id"]])[image["id"]]
    assert first["state"] == "cached"
    granted = Granted(stack, cell1, image["id"])
    half = len(image["data"]) // 2
    before = len(file_gets(stack, image["id"]))
    ranges: list[int] = []

    def dies(handler: Any, start: int) -> None:
        ranges.append(start)
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(image["data"])))
        handler.end_headers()
        handler.wfile.write(image["data"][:half])
        handler.wfile.flush()
        handler.connection.shutdown(2)  # the source dies half way

    with double(dies) as url:
        result = _cache_on(stack, cell1, "compute2", image["id"],
                           [Peer(host="dying", url=url, authorization="FleetcachePeer x.y"),
                            granted.peer()])

    assert result["state"] == "cached" and result["download_path"] == "peer", result
    assert result["source_host"] == "compute1"
    assert ranges == [0]
    # Only what the dying peer did not send came again (at most one chunk more).
    assert image["size"] <= result["bytes_from_peers"] <= image["size"] + (1 << 20)
    assert file_sha512(cached_file(stack, "compute2", image["id"])) == image["os_hash_value"]
    assert len(file_gets(stack, image["id"])) == before  # nothing from Glance


def test_the_image_server_serves_only_what_a_credential_names(stack, cell1, image):
    forget(stack, image["id"])
    cell1.cache_images(_ctxt(), "compute1", [image["id"]])
    granted = Granted(stack, cell1, image["id"])
    path = f"{granted.url}/v1/images/{image['id']}"
    other_image = str(uuid.uuid4())

    def get(url: str, authorization: str | None) -> requests.Response:
        headers = {"Authorization": authorization} if authorization else {}
        return requests.get(url, headers=headers, timeout=30)

    good = get(path, granted.authorization(requester_ip=None))
    assert good.status_code == 200 and hashlib.sha512(good.content).hexdigest() == image[
        "os_hash_value"]
    refused = {
        "no credential": get(path, None),
        "forged": get(path, granted.authorization(key=peer_tokens.new_key(),
                                                  requester_ip=None)),
        "another job": get(path, granted.authorization(job=str(uuid.uuid4()),
                                                       requester_ip=None)),
        "another image": get(path, granted.authorization(image_id=other_image,
                                                         requester_ip=None)),
        "another server": get(path, granted.authorization(server="compute2",
                                                          requester_ip=None)),
        "expired": get(path, granted.authorization(expires=1.0, requester_ip=None)),
        "another host's address": get(path, granted.authorization(requester_ip="192.0.2.7")),
        "a path": get(f"{granted.url}/v1/images/..%2F..%2Fetc%2Fpasswd",
                      granted.authorization(requester_ip=None)),
        "not granted": get(f"{granted.url}/v1/images/{other_image}",
                           granted.authorization(image_id=other_image, requester_ip=None)),
    }
    for what, resp in refused.items():
        assert resp.status_code in (400, 401, 403, 404), (what, resp.status_code)
        assert len(resp.content) < 1024, what  # an error, never image bytes


def test_a_compute_says_which_404_means_it_lacks_the_image(stack, cell1, image):
    """Each compute reports that its image server marks a not-cached answer, and a granted
    image it does not hold is answered 404 naming that image; a wrong route is not."""
    for host in ("compute1", "compute2", "compute3"):
        assert stack.service(host)["capabilities"]["peer"]["not_cached_header"] is True, host
    cell1.cache_images(_ctxt(), "compute1", [image["id"]])
    granted = Granted(stack, cell1, image["id"])
    forget_on(stack, "compute1", image["id"])  # aged out since it was granted
    auth = {"Authorization": granted.authorization(requester_ip=None)}

    absent = requests.get(f"{granted.url}/v1/images/{image['id']}", headers=auth, timeout=30)
    wrong = requests.get(f"{granted.url}/v2/images/{image['id']}", headers=auth, timeout=30)

    assert (absent.status_code, absent.headers.get(NOT_CACHED_HEADER)) == (404, image["id"])
    assert (wrong.status_code, wrong.headers.get(NOT_CACHED_HEADER)) == (404, None)


def _log_lines(stack: Any, host: str, *needles: str) -> list[int]:
    """The line number in ``host``'s log of the first line holding each of ``needles``."""
    lines = stack.log_file(host).read_text(errors="replace").splitlines()
    return [next((n for n, line in enumerate(lines) if needle in line), -1)
            for needle in needles]


@pytest.mark.parametrize("cut_through", [True, False], ids=["cut-through",
                                                            "store-and-forward"])
def test_with_cut_through_the_first_host_is_a_source_before_its_download_ends(
        stack, make_aggregate, image, cut_through):
    aggregate = make_aggregate(hosts=CELL1)
    options = PEERS_ON + f"peer_cut_through = {str(cut_through).lower()}\n"
    with stack.conductor_options("peers", options):
        resp = stack.api_request("POST", f"os-aggregates/{aggregate['id']}/images",
                                 microversion=MV, json={"cache": [{"id": image["id"]}]})
        assert resp.status_code == 202, resp.text
        job_id = resp.headers["Location"].rsplit("/", 1)[-1]
        job = wait_job_done(stack, aggregate["id"], job_id, timeout=300)

    assert job["state"] == "done", job
    results = {h["host"]: h["images"][0] for h in job["hosts"]}
    assert len(file_gets(stack, image["id"], at_least=1)) == 1  # one copy for the cell
    (receiver,) = [h for h, r in results.items() if r["download_path"] == "peer"]
    (source,) = [h for h in CELL1 if h != receiver]
    assert results[receiver]["source_host"] == source, results
    assert results[receiver]["bytes_from_peers"] == image["size"]
    for host in CELL1:
        assert file_sha512(cached_file(stack, host, image["id"])) == image["os_hash_value"]
    # The source agreed to serve (its grant) before its own download ended with cut-through,
    # after it without.
    served, cached = _log_lines(stack, source, f"to the peers of job {job_id}",
                                f"Cached image {image['id']}")
    assert served >= 0 and cached >= 0, (served, cached)
    assert (served < cached) is cut_through, (served, cached)
