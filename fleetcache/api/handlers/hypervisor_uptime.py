"""``GET /os-hypervisors/{id}/uptime``: a compute host's uptime, asked of the compute itself
(nova/api/openstack/compute/hypervisors.py ``uptime``, served up to 2.87).

As Nova's API, this one calls the compute over its cell's broker (``get_host_uptime``, compute
RPC 1.3) and answers its text, ``uptime(1)``'s (:mod:`fleetcache.compute.host_uptime`), which
the ``openstack`` client's ``hypervisor show`` reads:

* a compute that is down (its last heartbeat older than ``service_down_time``, or forced
  down) is 400 without a call, as Nova's ``ComputeServiceUnavailable``;
* one that does not answer within ``rpc_response_timeout``, or that cannot be reached, is 400
  too (Nova lets the timeout through as a 500);
* a compute that cannot tell (older than 1.3, or ``[upgrade_levels] compute`` below 1.3, or a
  host whose boot time psutil cannot read) is 501, as Nova's driver without ``get_host_uptime``.
"""

from __future__ import annotations

import logging

import oslo_messaging as messaging
import webob
import webob.exc

from fleetcache.api import util
from fleetcache.api.handlers import hypervisor_views as views
from fleetcache.api.handlers import hypervisors
from fleetcache.api.policies import hypervisors as policies
from fleetcache.common import exception, servicegroup
from fleetcache.common.db.services import ServiceDict

LOG = logging.getLogger(__name__)


def _unavailable(host: str) -> webob.exc.HTTPBadRequest:
    return webob.exc.HTTPBadRequest(
        explanation=f"Compute service of {host} is unavailable at this time.")


def _ask(req: webob.Request, service: ServiceDict) -> str:
    """The compute's uptime text.

    :raises webob.exc.HTTPBadRequest: the compute is down or does not answer.
    :raises webob.exc.HTTPNotImplemented: the compute cannot tell.
    """
    state = util.get_state(req)
    host = service["host"]
    if not servicegroup.service_is_up(service, state.conf.service_down_time):
        raise _unavailable(host)
    try:
        return state.compute_api(service["cell"]).get_host_uptime(util.get_context(req), host)
    except (NotImplementedError, exception.RPCVersionCapped,
            messaging.UnsupportedVersion) as exc:
        LOG.info("%s cannot tell its uptime: %s", host, exc)
        raise webob.exc.HTTPNotImplemented(explanation="Feature not supported.") from exc
    except messaging.MessagingException as exc:
        LOG.warning("Could not ask %s for its uptime: %s", host, exc)
        raise _unavailable(host) from exc


def get_hypervisor_uptime(req: webob.Request) -> webob.Response:
    """Show a hypervisor's uptime, as the compute host's ``uptime`` prints it."""
    hypervisors.authorize(req, policies.UPTIME)
    service = hypervisors.find(req, req.urlvars["hypervisor_id"])
    body = views.hypervisor(req, service, [])
    body["uptime"] = _ask(req, service)
    return util.json_response({"hypervisor": body})
