"""``/os-quota-sets/{project_id}``: a project's quotas, as Nova with unified limits answers
(nova/api/openstack/compute/quota_sets.py, ``nova.quota.UnifiedLimitsDriver``).

The limits are Keystone's (:mod:`fleetcache.api.quota`): show and detail give the project's
(its own limits, else the registered ones), ``/defaults`` the registered ones, detail also
what the project uses (``reserved`` is always 0). ``PUT`` and ``DELETE`` change nothing,
as Nova's with unified limits: a quota is changed in Keystone (``openstack limit create``);
``PUT`` answers the quota set as it is, ``DELETE`` 202. ``?user_id=`` is accepted and
answered with the project's quotas (no per-user quotas).

The quota names are the legacy ones (``instances``, ``cores``, ``ram``...); at 2.36 the
nova-network ones go, at 2.57 those of file injection, as in Nova.
"""

from __future__ import annotations

from typing import Any

import webob

from fleetcache.api import microversion, policy, util, validation
from fleetcache.api.policies import quota_sets as policies
from fleetcache.api.quota import resources
from fleetcache.api.schemas import quota_sets as schemas
from fleetcache.common import exception

V2_36 = microversion.Version(2, 36)
V2_57 = microversion.Version(2, 57)
V2_75 = microversion.Version(2, 75)
#: Longer is no Keystone project id (Keystone's are at most 64 characters).
MAX_PROJECT_ID = 255


def checked_project_id(value: str) -> str:
    """``value`` as a project id to look limits up for.

    :raises InvalidInput: (400, Nova's ``verify_project_id`` message) when it cannot be one.
    """
    if not value or len(value) > MAX_PROJECT_ID or not value.isprintable():
        shown = value if len(value) <= 64 else value[:64] + "..."
        raise exception.InvalidInput(f"Project ID {shown!r} is not a valid project.")
    return value


def removed_names(req: webob.Request) -> tuple[str, ...]:
    """The quota names the request's version no longer shows."""
    version = microversion.request_version(req)
    if version.matches(V2_57):
        return schemas.REMOVED_AT_2_36 + schemas.REMOVED_AT_2_57
    if version.matches(V2_36):
        return schemas.REMOVED_AT_2_36
    return ()


def _authorized_project(req: webob.Request, action: str, query: bool = True) -> str:
    """The URL's project, once the caller may ``action`` it and the query is valid."""
    project_id = req.urlvars["project_id"]
    policy.authorize(util.get_state(req).enforcer, util.get_context(req),
                     policies.ROOT % action, {"project_id": project_id})
    if query:
        validation.validate_query(req, schemas.QUOTA_SET_QUERY_V2_75 if microversion
                                  .request_version(req).matches(V2_75)
                                  else schemas.QUOTA_SET_QUERY)
    return checked_project_id(project_id)


def _quota_set(req: webob.Request, values: dict[str, Any],
               project_id: str | None) -> webob.Response:
    removed = removed_names(req)
    body: dict[str, Any] = {"id": project_id} if project_id is not None else {}
    body.update({name: values[name] for name in resources.LEGACY_NAMES
                 if name not in removed})
    return util.json_response({"quota_set": body})


def _limits(req: webob.Request, project_id: str) -> dict[str, int]:
    quotas = util.get_state(req).quota.project_quotas(project_id)
    return {name: quota.limit for name, quota in quotas.items()}


def get_quota_set(req: webob.Request) -> webob.Response:
    """Show a project's quotas (its limits in Keystone)."""
    project_id = _authorized_project(req, "show")
    return _quota_set(req, _limits(req, project_id), project_id)


def get_quota_set_detail(req: webob.Request) -> webob.Response:
    """Show a project's quotas with what it uses (in_use, limit, reserved)."""
    project_id = _authorized_project(req, "detail")
    quotas = util.get_state(req).quota.project_quotas(project_id)
    details = {name: {"in_use": q.in_use, "limit": q.limit, "reserved": 0}
               for name, q in quotas.items()}
    return _quota_set(req, details, project_id)


def get_quota_set_defaults(req: webob.Request) -> webob.Response:
    """Show the default quotas (Keystone's registered limits)."""
    project_id = _authorized_project(req, "defaults", query=False)
    return _quota_set(req, util.get_state(req).quota.default_quotas(), project_id)


def update_quota_set(req: webob.Request) -> webob.Response:
    """Validate an update and answer the project's quotas, unchanged (limits are Keystone's:
    ``openstack limit create``/``set``)."""
    project_id = _authorized_project(req, "update")
    version = microversion.request_version(req)
    schema = (schemas.UPDATE_V2_57 if version.matches(V2_57)
              else schemas.UPDATE_V2_36 if version.matches(V2_36) else schemas.UPDATE)
    validation.extract_body(req, schema)
    return _quota_set(req, _limits(req, project_id), None)


def delete_quota_set(req: webob.Request) -> webob.Response:
    """Accept a revert to the defaults (202); nothing to revert with Keystone's limits."""
    _authorized_project(req, "delete")
    return util.empty_response(202)
