"""A Placement that resets a pooled connection (a keep-alive server closing it as the request
goes out, or the answer lost on the way back) costs the conductor a retry, not a failed call
or a refused claim: ``[placement] connect_retries`` defaults to
:data:`~fleetcache.common.service_auth.CONNECT_RETRIES`. The client is the real one, from its
options, against a real HTTP server (a table of answers, or the session's real Placement
behind a relay that resets)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from oslo_config import cfg

from fleetcache.common import exception, service_auth
from fleetcache.conductor.placement import PlacementClient, ProviderSync, provider_uuid
from fleetcache.demo import placement_embedded
from tests.functional.conftest import unique_host
from tests.resetting_server import ResettingServer

PROVIDERS = {"/resource_providers": {"resource_providers": [{"uuid": "rp-1", "name": "h1"}]}}


def _client(conf: cfg.ConfigOpts, url: str) -> PlacementClient:
    """``[placement]`` as a lab without Keystone writes it (admin_token, an endpoint)."""
    placement_embedded.point_at(conf, url)
    client = PlacementClient.from_conf(conf)
    assert client is not None
    return client


def test_the_default_retries_a_reset_connection(conf: cfg.ConfigOpts) -> None:
    assert conf.placement.connect_retries == service_auth.CONNECT_RETRIES
    with ResettingServer(PROVIDERS, resets=1) as placement:
        providers = _client(conf, placement.url).list_providers()
    assert providers == [{"uuid": "rp-1", "name": "h1"}]
    assert placement.paths == ["/resource_providers", "/resource_providers"]


def test_without_retries_a_reset_is_a_placement_error(conf: cfg.ConfigOpts) -> None:
    conf.set_override("connect_retries", 0, group="placement")
    with ResettingServer(PROVIDERS, resets=1) as placement:
        with pytest.raises(exception.PlacementError, match="Connection reset by peer"):
            _client(conf, placement.url).list_providers()
    assert placement.paths == ["/resource_providers"]


def _provider_with_room(client: PlacementClient) -> str:
    """A new provider with 4 VCPU and 4096 MEMORY_MB; its uuid."""
    def record(total: int) -> dict[str, Any]:
        return {"total": total, "reserved": 0, "min_unit": 1, "max_unit": total,
                "step_size": 1, "allocation_ratio": 1.0}
    host = unique_host("claim")
    ProviderSync(client, 3).sync(
        host, {"inventory": {"VCPU": record(4), "MEMORY_MB": record(4096)}}, set())
    return provider_uuid(host)


def _request(provider: str, vcpu: int = 1) -> dict[str, Any]:
    return {"allocations": {provider: {"resources": {"VCPU": vcpu, "MEMORY_MB": 512}}}}


def test_a_claim_applied_before_its_answer_was_lost_holds(
    conf: cfg.ConfigOpts, placement_client: PlacementClient, placement_endpoint: str,
) -> None:
    """Placement applies the PUT, the relay resets its answer, keystoneauth sends it again and
    Placement answers 409 (the consumer exists): the claim is this one, so it holds."""
    provider = _provider_with_room(placement_client)
    consumer = str(uuid.uuid4())
    with ResettingServer(resets=1, upstream=placement_endpoint,
                         after_answering=True) as relay:
        claimed = _client(conf, relay.url).claim_allocation(
            consumer, _request(provider), "project", "user")

    assert claimed is True
    assert relay.paths == [f"/allocations/{consumer}"] * 3  # PUT, PUT again, GET
    held = placement_client.get_allocations(consumer)
    assert held[provider]["resources"] == {"VCPU": 1, "MEMORY_MB": 512}


def test_a_consumer_holding_another_claim_is_refused(placement_client: PlacementClient) -> None:
    provider = _provider_with_room(placement_client)
    consumer = str(uuid.uuid4())
    assert placement_client.claim_allocation(consumer, _request(provider), "project", "user")

    assert placement_client.claim_allocation(
        consumer, _request(provider, vcpu=2), "project", "user") is False
    held = placement_client.get_allocations(consumer)
    assert held[provider]["resources"] == {"VCPU": 1, "MEMORY_MB": 512}
