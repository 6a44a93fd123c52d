"""The transports a conductor serves: the default broker and every cell's, one per URL.

:class:`CellTransports` answers "which cell does this broker belong to" (``routes``) and gives
RPC clients into a cell's computes (``compute_api``).
:class:`CellListeners` keeps one conductor RPC server per transport running in a
:class:`~fleetcache.common.service.Service`,
following the cells table: a cell created while the conductor runs is served within
``[conductor] cell_refresh_interval``, a deleted one is dropped.

The transports themselves are the conductor's :class:`~fleetcache.common.rpc.Transports`,
built at start-up and passed in. The endpoints are built by a factory the caller passes in
(``fleetcache.cmd.conductor``), so this module never imports the manager that uses it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Protocol

import oslo_messaging as messaging
from oslo_config import cfg

from fleetcache.common import rpc
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db.session import Database
from fleetcache.common.service import Service
from fleetcache.compute.rpcapi import ComputeAPI

LOG = logging.getLogger(__name__)

_URL_PASSWORD = re.compile(r"((?://|,)[^:/@,]+:)[^@/]*@")


def redact_url(url: str | None) -> str:
    """``rabbit://user:secret@host/`` -> ``rabbit://user:***@host/``, for logs."""
    if url is None:
        return "[DEFAULT] transport_url"
    return _URL_PASSWORD.sub(r"\1***@", url)


class CellEndpoint(Protocol):
    """What :class:`CellListeners` needs of the endpoint serving one transport
    (``ConductorManager``): the cell it serves, updated when that cell is renamed."""

    cell: db_cells.CellDict | None


class CellTransports:
    """The default transport and every cell's, deduplicated by URL.

    :param transports: the conductor's transports, opened per URL on first use.
    """

    def __init__(self, conf: cfg.ConfigOpts, db: Database, transports: rpc.Transports) -> None:
        self.conf = conf
        self.db = db
        self._transports = transports
        self._computes: dict[str | None, ComputeAPI] = {}
        self._lock = threading.Lock()
        self._warned: set[tuple[str, str]] = set()

    def routes(self) -> dict[str | None, db_cells.CellDict | None]:
        """``{transport_url: cell}``: the default transport (``None`` when it is no cell's)
        and each cell's. Cells sharing a URL map to the first of them, with a warning."""
        default_url: str | None = self.conf.transport_url
        routes: dict[str | None, db_cells.CellDict | None] = {default_url: None}
        for cell in db_cells.cell_list(self.db):
            url = cell["transport_url"]
            owner = routes.get(url)
            if owner is not None:
                self._warn_shared(owner, cell)
                continue
            routes[url] = cell
        return routes

    def _warn_shared(self, owner: db_cells.CellDict, cell: db_cells.CellDict) -> None:
        pair = (owner["uuid"], cell["uuid"])
        if pair not in self._warned:
            self._warned.add(pair)
            LOG.warning("Cells %s and %s share transport %s; services registering through it "
                        "are mapped to %s", owner["name"], cell["name"],
                        redact_url(cell["transport_url"]), owner["name"])

    def transport(self, url: str | None) -> messaging.Transport:
        return self._transports.get(url)

    def compute_api(self, cell: db_cells.CellDict | None) -> ComputeAPI:
        """The compute RPC client for ``cell``'s broker (``None``: the default transport),
        built once per URL."""
        url = cell["transport_url"] if cell is not None else None
        with self._lock:
            api = self._computes.get(url)
            if api is None:
                api = self._computes[url] = self._build(url)
            return api

    def _build(self, url: str | None) -> ComputeAPI:
        return ComputeAPI(self.conf, self.transport(url))


class CellListeners:
    """One conductor RPC server per transport of :class:`CellTransports`, kept in ``service``.

    :param make_endpoint: builds the endpoint serving one cell (``None``: no cell), e.g. a
        ``ConductorManager`` sharing the process's ``ConductorState``.
    """

    def __init__(
        self,
        transports: CellTransports,
        service: Service,
        make_endpoint: Callable[[db_cells.CellDict | None], CellEndpoint],
        topic: str = "conductor",
    ) -> None:
        self.transports = transports
        self.service = service
        self.make_endpoint = make_endpoint
        self.topic = topic
        self._served: dict[str | None, tuple[str, CellEndpoint]] = {}

    def refresh(self, strict: bool = False) -> None:
        """Serve new cells' transports, stop serving deleted ones.

        :param strict: raise when the default transport cannot be served (start-up);
            otherwise a failing transport is logged and tried again at the next refresh.
        """
        routes = self.transports.routes()
        for url in [u for u in self._served if u not in routes]:
            key, _endpoint = self._served.pop(url)
            LOG.info("No cell uses %s any more; stopping its conductor server", redact_url(url))
            self.service.remove_server(key)
        for url, cell in routes.items():
            served = self._served.get(url)
            if served is not None:
                served[1].cell = cell  # a cell renamed or re-created on the same URL
                continue
            try:
                self._serve(url, cell)
            except Exception:
                if strict and url == self.transports.conf.transport_url:
                    raise
                LOG.exception("Cannot serve the conductor API on %s (cell %s); retrying in "
                              "%d s", redact_url(url), cell["name"] if cell else "-",
                              self.transports.conf.conductor.cell_refresh_interval)

    def _serve(self, url: str | None, cell: db_cells.CellDict | None) -> None:
        endpoint = self.make_endpoint(cell)
        server = rpc.get_server(
            self.transports.transport(url), self.topic, self.transports.conf.host, [endpoint]
        )
        key = f"{self.topic} on {redact_url(url)}"
        self.service.add_server(key, server)
        self._served[url] = (key, endpoint)
        LOG.info("Serving topic %s on %s for cell %s", self.topic, redact_url(url),
                 cell["name"] if cell else "(none)")
