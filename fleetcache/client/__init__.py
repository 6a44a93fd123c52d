"""The operator's client of the fleetcache REST API: it speaks HTTP to ``fleetcache-api`` and
imports nothing else of fleetcache, so it needs none of the services' dependencies.

* :mod:`~fleetcache.client.api_client`: :class:`ApiClient` (the API at microversion
  :data:`MICROVERSION`, authenticated as every OpenStack client is), :class:`ApiError`,
  :data:`END_STATES` (where a wait for a job ends), :func:`versioned_endpoint`;
* :mod:`~fleetcache.client.render`: how a job is shown (progress bar, per-host table,
  summary, exit status) and a host's image cache;
* :mod:`~fleetcache.client.cli`: the ``fleetcache`` command line's commands (its console
  script is :mod:`fleetcache.cmd.client`);
* :mod:`~fleetcache.client.osc`: the same commands as an ``openstack`` client plugin.

Use::

    from fleetcache.client import ApiClient

    api = ApiClient.from_env(cloud="mycloud")
    job = api.wait_job(api.cache_images(api.find_aggregate("edge-1")["id"], [image_id]))
"""

from __future__ import annotations

from fleetcache.client.api_client import (
    END_STATES,
    MICROVERSION,
    ApiClient,
    ApiError,
    versioned_endpoint,
)

__all__ = ["END_STATES", "MICROVERSION", "ApiClient", "ApiError", "versioned_endpoint"]
