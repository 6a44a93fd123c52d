"""Network look-ups for the clients' ``--network none`` (a fleetcache addition; Nova has no
network API of its own since 2.36).

fleetcache attaches no network. Nova's own "no network" is ``"networks": "none"``, which
``openstack server create`` sends for ``--nic none``; but ``--network none`` is a network
*name* to the client (python-openstackclient 10.5.0 turns it into ``net-id=none`` and looks it
up: ``GET .../networks/none``, then ``GET .../networks?name=none``; with ``OS_AUTH_TYPE=none``
that is this endpoint). So one pseudo-network exists here, ``none``, shaped as Neutron shows a
network; a server asked for with it (``"networks": [{"uuid": "none"}]``) gets no network,
exactly as with ``"networks": "none"``.
"""

from __future__ import annotations

from typing import Any

import webob

from fleetcache.api import policy, util
from fleetcache.api.policies import networks as policies
from fleetcache.common import exception

#: The one network: no network.
NONE_NETWORK = "none"


def _network() -> dict[str, Any]:
    return {"id": NONE_NETWORK, "name": NONE_NETWORK, "status": "ACTIVE", "subnets": [],
            "admin_state_up": True, "shared": True, "router:external": False,
            "description": "No network: servers get none (fleetcache attaches no network)"}


def _authorize(req: webob.Request) -> None:
    policy.authorize(util.get_state(req).enforcer, util.get_context(req), policies.SHOW)


def get_network(req: webob.Request) -> webob.Response:
    """Show the pseudo-network ``none`` (any other id is 404)."""
    _authorize(req)
    if req.urlvars["network_id"] != NONE_NETWORK:
        raise exception.NotFound(message=f"Network {req.urlvars['network_id']} could not be "
                                 "found.")
    return util.json_response({"network": _network()})


def list_networks(req: webob.Request) -> webob.Response:
    """Find networks by ``id`` or ``name``: only ``none`` exists."""
    _authorize(req)
    wanted = req.GET.getall("id") + req.GET.getall("name")
    found = [_network()] if not wanted or NONE_NETWORK in wanted else []
    return util.json_response({"networks": found})
