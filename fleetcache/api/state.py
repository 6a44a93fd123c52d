"""What every handler shares: configuration, database, policy enforcer, conductor client, and
the compute clients of the cells."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

from oslo_config import cfg
from oslo_policy import policy

from fleetcache.api import quota
from fleetcache.api.image_names import ImageNames
from fleetcache.common import rpc
from fleetcache.common.context import RequestContext
from fleetcache.common.db.cells import CellDict
from fleetcache.common.db.jobs import JobDict
from fleetcache.common.db.session import Database
from fleetcache.image import source
from fleetcache.image.source import ImageSource


class CacheImagesAPI(Protocol):
    """The part of ``fleetcache.conductor.rpcapi.ConductorAPI`` the API calls."""

    def cache_images(
        self, ctxt: RequestContext, aggregate_id: int, image_ids: list[str],
        pin_seconds: int | None = None, terms: Mapping[str, Any] | None = None,
    ) -> JobDict: ...

    def sync_host_aggregates(self, ctxt: RequestContext, host: str) -> None: ...

    def build_instances(
        self, ctxt: RequestContext, instance_uuids: list[str], min_count: int = 1
    ) -> None: ...

    def rebuild_instance(self, ctxt: RequestContext, instance_uuid: str) -> None: ...

    def delete_instance(self, ctxt: RequestContext, instance_uuid: str) -> None: ...


class HostUptimeAPI(Protocol):
    """The part of ``fleetcache.compute.rpcapi.ComputeAPI`` the API calls (as Nova's API asks
    a compute for its uptime)."""

    def get_host_uptime(self, ctxt: RequestContext, host: str) -> str: ...


class ApiState:
    """Built once per application by :func:`fleetcache.api.deploy.deploy`.

    The conductor client, the compute clients and the image source are created on first use,
    so an API without a reachable message bus still serves everything but pre-caching, boots
    and hypervisor uptimes. The clients' transports come from :attr:`transports`, this
    application's own: the conductor's is ``[DEFAULT] transport_url``, a compute's is its
    cell's (the cells table), as Nova's API reaches a cell's computes.

    :param conductor_api: replaces the conductor client (fast tests only).
    :param compute_api: replaces every cell's compute client (fast tests only).
    """

    def __init__(
        self,
        conf: cfg.ConfigOpts,
        db: Database,
        enforcer: policy.Enforcer,
        conductor_api: CacheImagesAPI | None = None,
        compute_api: HostUptimeAPI | None = None,
    ) -> None:
        self.conf = conf
        self.db = db
        self.enforcer = enforcer
        #: ``[quota] driver``: the limits of ``POST /servers``, ``/limits``, ``/os-quota-sets``.
        self.quota = quota.get_driver(conf, db)
        self._conductor_api = conductor_api
        self._compute_api = compute_api
        self._compute_apis: dict[str | None, HostUptimeAPI] = {}
        self.transports = rpc.Transports(conf)
        self._image_source: ImageSource | None = None
        self._lock = threading.Lock()
        #: The status page's image names, from :attr:`image_source`, cached.
        self.image_names = ImageNames(self._image_name)

    @property
    def image_source(self) -> ImageSource:
        """``[image_source] backend``, loaded on first use (image look-ups only)."""
        with self._lock:
            if self._image_source is None:
                self._image_source = source.load_image_source(self.conf)
            return self._image_source

    def _image_name(self, ctxt: RequestContext, image_id: str) -> str | None:
        return self.image_source.show(ctxt, image_id).name

    @property
    def conductor_api(self) -> CacheImagesAPI:
        with self._lock:
            if self._conductor_api is None:
                from fleetcache.conductor import rpcapi  # the RPC client only (import rule)

                self._conductor_api = rpcapi.ConductorAPI(self.conf, self.transports.get())
            return self._conductor_api

    def compute_api(self, cell: CellDict | None) -> HostUptimeAPI:
        """The compute RPC client of ``cell``'s broker (``None``: ``[DEFAULT] transport_url``),
        built once per URL."""
        if self._compute_api is not None:
            return self._compute_api
        url = cell["transport_url"] if cell is not None else None
        with self._lock:
            api = self._compute_apis.get(url)
            if api is None:
                from fleetcache.compute import rpcapi  # the RPC client only (import rule)

                api = self._compute_apis[url] = rpcapi.ComputeAPI(
                    self.conf, self.transports.get(url))
            return api
