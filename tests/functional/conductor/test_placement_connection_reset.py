"""A Placement that resets a pooled connection (a keep-alive server closing it as the request
goes out) costs the conductor a retry, not a failed call: ``[placement] connect_retries``
defaults to :data:`~fleetcache.common.service_auth.CONNECT_RETRIES`. The client is the real
one, from its options, against a real HTTP server."""

from __future__ import annotations

import pytest
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from fleetcache.common import exception, service_auth
from fleetcache.conductor.placement import PlacementClient
from tests.resetting_server import ResettingServer

PROVIDERS = {"/resource_providers": {"resource_providers": [{"uuid": "rp-1", "name": "h1"}]}}


def _client(conf: cfg.ConfigOpts, url: str) -> PlacementClient:
    """``[placement]`` as a lab without Keystone writes it (admin_token, an endpoint)."""
    conf.set_override("auth_type", "admin_token", group="placement")
    conf.register_opts(ks_loading.get_auth_plugin_conf_options("admin_token"),
                       group="placement")
    conf.set_override("endpoint", url, group="placement")
    conf.set_override("token", "admin", group="placement")
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
