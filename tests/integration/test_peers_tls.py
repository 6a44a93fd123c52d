"""Peer distribution over mutual TLS on the real stack (issue 22): cell1's computes restarted
with ``[image_cache] peer_ssl_*`` (certificates made here by a CA of the test, each with the
compute's registered image-server address as an IP SAN; the stack itself stays plain), then a
job with the conductor's ``peer_distribution`` on.

* compute1 and compute2 register ``https://`` image servers, the job fetches one copy from
  Glance for the cell and the other host takes its bytes from its peer over TLS, every copy
  Glance's bytes;
* a client without a certificate of the fleet's CA gets nothing from a compute's image
  server, whatever credential it would show.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.integration.stackops import (
    MV,
    cached_file,
    file_gets,
    file_sha512,
    sha512_image,
    wait_job_done,
)
from tests.tls_certs import TestCA
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

IMAGE_MIB = 16
CELL1 = ("compute1", "compute2")
PEERS_ON = "[image_cache]\npeer_distribution = true\nprecache_concurrency = 3\n"


@pytest.fixture
def image(stack: Any) -> Iterator[dict[str, Any]]:
    with sha512_image(stack, IMAGE_MIB, "it-peers-tls") as body:
        yield body


def _peer_site(stack: Any, host: str) -> dict[str, Any]:
    site: dict[str, Any] = stack.service(host)["capabilities"]["peer"]
    return site


@pytest.fixture
def tls_cell1(stack: Any) -> Iterator[TestCA]:
    """compute1 and compute2 serving and fetching over mutual TLS for the test."""
    ca = TestCA(stack.dir / "peer-tls-test")
    with contextlib.ExitStack() as restarts:
        for host in CELL1:
            address = _peer_site(stack, host)["address"]
            certs = ca.issue(host, ip=address)
            restarts.enter_context(stack.compute_options(
                host, "peer-tls",
                f"[image_cache]\npeer_ssl_cert_file = {certs.cert}\n"
                f"peer_ssl_key_file = {certs.key}\npeer_ssl_ca_file = {certs.ca}\n"))
        for host in CELL1:
            wait_for(lambda h=host: _peer_site(stack, h)["url"].startswith("https://"),
                     f"{host} to register an https image server", 60)
        yield ca


def test_a_job_over_tls_takes_the_cells_second_copy_from_its_peer(
        stack, make_aggregate, image, tls_cell1):
    aggregate = make_aggregate(hosts=CELL1)
    with stack.conductor_options("peers-tls", PEERS_ON):
        resp = stack.api_request("POST", f"os-aggregates/{aggregate['id']}/images",
                                 microversion=MV, json={"cache": [{"id": image["id"]}]})
        assert resp.status_code == 202, resp.text
        job = wait_job_done(stack, aggregate["id"], resp.headers["Location"].rsplit("/", 1)[-1],
                            timeout=300)

    assert job["state"] == "done", job
    results = {h["host"]: h["images"][0] for h in job["hosts"]}
    assert {r["state"] for r in results.values()} == {"cached"}, results
    for host in CELL1:
        assert file_sha512(cached_file(stack, host, image["id"])) == image["os_hash_value"]
    assert len(file_gets(stack, image["id"], at_least=1)) == 1  # one copy from Glance
    [receiver] = [h for h, r in results.items() if r["download_path"] == "peer"]
    assert results[receiver]["source_host"] == next(h for h in CELL1 if h != receiver)
    assert results[receiver]["bytes_from_peers"] == image["size"]


def test_a_client_without_a_fleet_certificate_gets_nothing(stack, tls_cell1, image):
    site = _peer_site(stack, "compute1")
    url = f"{site['url']}/v1/images/{image['id']}"
    stranger = TestCA(stack.dir / "peer-tls-test" / "stranger", "stranger CA").issue(
        "stranger", ip=site["address"])
    for cert in (None, (stranger.cert, stranger.key)):
        with pytest.raises(requests.exceptions.ConnectionError):  # SSLError is one
            requests.get(url, cert=cert, verify=tls_cell1.ca_file, timeout=30)
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(url.replace("https://", "http://"), timeout=30)
