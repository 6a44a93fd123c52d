"""A real Placement for the functional tests: openstack-placement's WSGI app on SQLite, served
on 127.0.0.1 for the whole session (one per process: ``fleetcache.demo.placement_embedded``).
Tests share it, so each names its hosts uniquely (:func:`unique_host`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from keystoneauth1 import adapter as ks_adapter
from oslo_config import cfg

from fleetcache.common import config
from fleetcache.conductor.placement import PlacementClient
from fleetcache.demo import placement_embedded


@pytest.fixture(scope="session")
def placement_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with placement_embedded.serve(str(tmp_path_factory.mktemp("placement"))) as endpoint:
        yield endpoint


@pytest.fixture
def placement_conf(placement_endpoint: str) -> cfg.ConfigOpts:
    """A fleetcache configuration whose ``[placement]`` is the session's Placement."""
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([], project="fleetcache", default_config_files=[])
    placement_embedded.point_at(conf, placement_endpoint)
    return conf


@pytest.fixture
def placement_client(placement_conf: cfg.ConfigOpts) -> PlacementClient:
    client = PlacementClient.from_conf(placement_conf)
    assert client is not None
    return client


def unreachable(client: PlacementClient) -> PlacementClient:
    """``client``'s session against a port nothing listens on (Placement down)."""
    session = client._adapter.session
    return PlacementClient(ks_adapter.Adapter(
        session, service_type="placement", endpoint_override="http://127.0.0.1:9",
        raise_exc=False))


def unique_host(prefix: str = "host") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
