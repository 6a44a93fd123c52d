"""What a pre-cache job needs to know of its hosts' compute services, in one narrow query.

A job asks a host unless its compute service is missing, down (``forced_down``, or its last
heartbeat older than ``service_down_time``: the keys :func:`~fleetcache.common.servicegroup.
service_is_up` reads) or disabled, and it calls it through its cell's transport. That is five
columns of the service and its cell; the job reads them for every host of the aggregate,
:data:`~fleetcache.conductor.precache.job.LOOKUP_PAGE` hosts at a time.

NOTE: the job used ``services.service_list`` (ORM ``Service`` rows with their cell joined, each
turned into a whole ``ServiceDict``: timestamps, capabilities decoded from JSON) for this,
at several times the CPU per host, growing with the fleet (``bench/fanout.py --profile``,
``bench/conductor_memory.py --trace``; docs/performance.md, "The pre-cache job's own CPU per
host").
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import NotRequired, TypedDict

from sqlalchemy import select

from fleetcache.common import binaries
from fleetcache.common.db import models
from fleetcache.common.db.cells import CellDict
from fleetcache.common.db.inlist import padded
from fleetcache.common.db.session import Database

#: The capability under which a compute reports its image server for peers
#: (``{"url": ..., "group": ...}``, ``fleetcache.compute.rpcapi.PeerEndpoint``).
PEER_CAPABILITY = "peer"


class ComputeState(TypedDict):
    """A host's compute service as a pre-cache job sees it."""

    host: str
    #: The host's cell (the same dict for every host of a cell), ``None`` for no cell.
    cell: CellDict | None
    disabled: bool
    forced_down: bool
    last_seen_up: datetime.datetime | None


def compute_states(
    db: Database, hosts: Iterable[str], binary: str = binaries.COMPUTE
) -> dict[str, ComputeState]:
    """``{host: state}`` of the ``binary`` services on ``hosts``, in one query (services
    left-joined to their cells). A host without such a service is absent; callers report it.
    """
    service, cell = models.Service, models.Cell
    query = select(
        service.host, service.disabled, service.forced_down, service.last_seen_up,
        service.cell_id, cell.uuid, cell.name, cell.transport_url,
    ).outerjoin(cell, cell.id == service.cell_id).where(
        service.binary == binary, service.host.in_(padded(hosts)))
    cells: dict[int, CellDict] = {}
    states: dict[str, ComputeState] = {}
    with db.transaction() as session:
        for host, disabled, forced, seen, cell_id, uuid, name, url in session.execute(query):
            found = None
            if cell_id is not None:
                found = cells.get(cell_id)
                if found is None:
                    found = cells[cell_id] = CellDict(
                        id=cell_id, uuid=uuid, name=name, transport_url=url)
            states[host] = ComputeState(host=host, cell=found, disabled=bool(disabled),
                                        forced_down=bool(forced), last_seen_up=seen)
    return states


class PeerSite(TypedDict):
    """Where a compute serves its cache to the hosts of its peer group (peer distribution).

    :ivar url: its image server, as it reported it at registration.
    :ivar group: its peer group: its cell's name (``-`` for none), then ``/`` and its
        ``[image_cache] peer_group`` when it reports one.
    :ivar address: the address its requests to peers come from: its image server's (the
        network of ``peer_listen_address``), else its ``[DEFAULT] my_ip``.
    :ivar not_cached_header: whether it reported that its image server names the image in
        a 404 for an image it does not hold (absent: it did not).
    """

    url: str
    group: str
    address: str | None
    not_cached_header: NotRequired[bool]


def peer_sites(db: Database, hosts: Iterable[str],
               binary: str = binaries.COMPUTE) -> dict[str, PeerSite]:
    """``{host: site}`` of the ``binary`` services on ``hosts`` that run an image server for
    peers (their capabilities name one), in one query; the others are absent.

    Read only by jobs with peer distribution on: it decodes each host's capabilities, which
    :func:`compute_states` leaves alone for the cost noted above."""
    service, cell = models.Service, models.Cell
    query = select(service.host, service.capabilities, service.host_ip, cell.name).outerjoin(
        cell, cell.id == service.cell_id).where(
        service.binary == binary, service.host.in_(padded(hosts)))
    sites: dict[str, PeerSite] = {}
    with db.transaction() as session:
        for host, capabilities, address, cell_name in session.execute(query):
            peer = (capabilities or {}).get(PEER_CAPABILITY)
            if not (isinstance(peer, dict) and isinstance(peer.get("url"), str)):
                continue
            group = str(cell_name or "-")
            if isinstance(peer.get("group"), str) and peer["group"]:
                group = f"{group}/{peer['group']}"
            own = peer.get("address")
            sites[host] = PeerSite(url=peer["url"], group=group,
                                   address=own if isinstance(own, str) and own else address)
            if peer.get("not_cached_header") is True:
                sites[host]["not_cached_header"] = True
    return sites
