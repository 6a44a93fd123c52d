"""Whether a project exists, asked of Keystone with the caller's own token, as Nova's
``nova/api/openstack/identity.py`` ``verify_project_id`` does before it shares a flavor.

keystonemiddleware's ``auth_token`` leaves the caller's credentials in the WSGI environ
(``keystone.token_auth``, a keystoneauth plugin, documented for this use); a keystoneauth
session with it reaches the identity endpoint of the token's catalog. Keystone's answer:

* 2xx: the project exists;
* 404: it does not: :class:`InvalidInput` (400, Nova's message);
* 403 or anything else, or Keystone unreachable: the caller may not be able to tell, so the
  project is taken as it is (logged), as Nova does;
* no identity endpoint in the catalog: 400, as Nova ("unable to find Keystone").

Without ``auth_token`` (``[api] auth_strategy = noauth``) there is no Keystone to ask: every
project id is taken.
"""

from __future__ import annotations

import logging
import urllib.parse

import webob
from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import session as ks_session

from fleetcache.api import util
from fleetcache.common import exception

LOG = logging.getLogger(__name__)
#: Where keystonemiddleware's auth_token leaves the caller's auth plugin.
TOKEN_AUTH_KEY = "keystone.token_auth"
#: The catalog interfaces tried, in order (Nova's ``[keystone] valid_interfaces`` default).
INTERFACES = ["internal", "public"]


def _session(req: webob.Request) -> ks_session.Session | None:
    auth = req.environ.get(TOKEN_AUTH_KEY)
    if auth is None:
        return None
    opts = util.get_state(req).conf.keystone_authtoken
    verify: bool | str = False if opts.insecure else (opts.cafile or True)
    return ks_session.Session(auth=auth, verify=verify, timeout=opts.http_connect_timeout)


def verify_project_id(req: webob.Request, project_id: str, missing_ok: bool = False) -> None:
    """Refuse a project Keystone says does not exist.

    :param missing_ok: take a project Keystone does not know (to remove it from a list).
    :raises InvalidInput: (400) when Keystone answers 404 for it (unless ``missing_ok``), or
        the token's catalog has no identity v3 endpoint.
    """
    session = _session(req)
    if session is None:
        return
    path = "/projects/" + urllib.parse.quote(project_id, safe="")
    try:
        response = session.get(path, raise_exc=False, endpoint_filter={
            "service_type": "identity", "interface": INTERFACES,
            "min_version": (3, 0), "max_version": (3, "latest")})
    except ks_exceptions.EndpointNotFound as exc:
        LOG.error("No Keystone identity v3 endpoint in the token's catalog: %s", exc)
        raise exception.InvalidInput(
            "fleetcache was unable to find Keystone service endpoint.") from exc
    except ks_exceptions.ClientException as exc:
        LOG.info("Unable to contact Keystone to verify project %s: %s", project_id[:64], exc)
        return
    if response.status_code == 404 and not missing_ok:
        raise exception.InvalidInput(f"Project ID {project_id} is not a valid project.")
    if not response.ok and response.status_code != 404:
        LOG.info("Keystone answered %s for project %s: taken as it is",
                 response.status_code, project_id[:64])
