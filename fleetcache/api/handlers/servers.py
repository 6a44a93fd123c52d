"""``/servers``: create, list, show, rename and delete servers, shaped as Nova's
(nova/api/openstack/compute/servers.py).

A server is a scheduled instance whose root disk a compute builds (no hypervisor, no
network). Create checks what the API can check (flavor, image, zone, counts, policy), records
the instances ``BUILD`` and casts ``build_instances`` to the conductor, which schedules them
and has the chosen computes create the disks (:mod:`fleetcache.conductor.build`); the
client follows the status (``openstack server create --wait``). Delete casts
``delete_instance``, or deletes at once a server that never got a host.

A cast that cannot be sent (no message bus) does not lose the request: the servers go to
``ERROR`` with a fault saying so, and the caller still gets its 202.

What the owner says of a server is kept and shown as Nova keeps it, validated as Nova does
(:mod:`fleetcache.api.handlers.server_fields`): ``description`` (2.19; below it Nova stores the
name), ``metadata`` (at most ``metadata_items`` keys, 403 above as Nova's quota),
``accessIPv4``/``accessIPv6`` and ``OS-DCF:diskConfig`` (create and ``PUT``). ``adminPass`` is
not stored (there is no guest to give it to): the 202 carries it as Nova's does (the one
given, else a generated one, as Nova with its default ``enable_instance_password``).

The project's quota (:mod:`fleetcache.api.quota`) is asked before anything is recorded: a
create over it is Nova's 403, a multiple create is cut down to what fits.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import Any

import webob
import webob.exc
from oslo_utils import uuidutils

from fleetcache.api import microversion, pagination, policy, util, validation
from fleetcache.api.handlers import server_fields, server_filters, server_views
from fleetcache.api.handlers.flavors import get_visible, links
from fleetcache.api.handlers.server_filters import ref_id
from fleetcache.api.policies import servers as policies
from fleetcache.api.quota import BaseQuotaCheck
from fleetcache.api.quota import usage as quota_usage
from fleetcache.api.schemas import servers as schemas
from fleetcache.common import exception, instance_states, rpc
from fleetcache.common.db import flavors as db_flavors
from fleetcache.common.db import instances as db_instances
from fleetcache.common.db.instances import InstanceCreate, InstanceDict
from fleetcache.common.db.models import utcnow
from fleetcache.image.source import ImageMeta

LOG = logging.getLogger(__name__)

NETWORKS_REQUIRED_VERSION = microversion.Version(2, 37)
DESCRIPTION_VERSION = server_views.DESCRIPTION_VERSION
GiB = 1024**3
#: Bytes of randomness of a generated ``adminPass`` (16 URL-safe characters).
PASSWORD_BYTES = 12
#: Errors of sending a cast: the request is recorded as a fault, never lost.
CAST_ERRORS: tuple[type[Exception], ...] = (exception.RPCVersionCapped,
                                             *rpc.DELIVERY_ERRORS)


def authorize(req: webob.Request, action: str, target: dict[str, Any] | None = None) -> None:
    """``action`` is a server action (``create``, ``create:forced_host``) or a full rule name."""
    name = action if action.startswith("os_compute_api:") else policies.ROOT % action
    policy.authorize(util.get_state(req).enforcer, util.get_context(req), name, target)


def _target(instance: InstanceDict) -> dict[str, Any]:
    return {"project_id": instance["project_id"], "user_id": instance["user_id"]}


def get_instance(req: webob.Request, action: str) -> InstanceDict:
    """The server of the URL, if the caller may ``action`` it.

    :raises InstanceNotFound: when there is no such server, or it is another project's and
        the caller may not act on it (Nova answers 404 rather than 403 then).
    """
    uuid = req.urlvars["server_id"]
    instance = db_instances.instance_get(util.get_state(req).db, uuid)
    try:
        authorize(req, action, _target(instance))
    except exception.PolicyNotAuthorized as exc:
        if instance["project_id"] != util.get_context(req).project_id:
            raise exception.InstanceNotFound(instance_id=uuid) from exc
        raise
    return instance


# -- list and show ---------------------------------------------------------------------------


def _visible(req: webob.Request, action: str) -> list[InstanceDict]:
    """The caller's project's servers; every project's with ``?all_tenants`` (admins)."""
    authorize(req, action)
    raw = req.GET.get("all_tenants")
    instances = db_instances.instance_list(util.get_state(req).db)
    if raw is not None and raw.strip().lower() not in ("0", "false", "no", "off"):
        authorize(req, policies.ALL_PROJECTS)
        return instances
    project_id = util.get_context(req).project_id
    return [i for i in instances if i["project_id"] == project_id]


def _uuid(instance: InstanceDict) -> str:
    return instance["uuid"]


def _list(req: webob.Request, action: str) -> tuple[list[InstanceDict], dict[str, Any]]:
    """A page of the visible servers that pass Nova's ``name`` (a regular expression),
    ``image`` and ``flavor`` filters, and its ``servers_links``."""
    visible = _visible(req, action)  # authorizes: a refusal comes before any query error
    limit, marker = pagination.limit_and_marker(req)
    wanted = server_filters.from_query(req.GET)
    in_status = server_filters.status_matcher(req.GET.getall("status"),
                                              microversion.request_version(req))
    instances = [i for i in pagination.after_marker(visible, _uuid, marker)
                 if in_status(i) and wanted(i)][:limit]
    return instances, pagination.links(req, "servers", instances, limit, _uuid)


def list_servers(req: webob.Request) -> webob.Response:
    """List the project's servers: id, name, links (``?all_tenants=1`` for admins; ``name``,
    ``status``, ``image``, ``flavor``, ``limit``, ``marker`` as Nova)."""
    instances, links_ = _list(req, "index")
    return util.json_response(
        {"servers": [server_views.format_summary(req, i) for i in instances], **links_})


def list_servers_detail(req: webob.Request) -> webob.Response:
    """List the project's servers in full (the same filters as the list)."""
    instances, links_ = _list(req, "detail")
    return util.json_response(
        {"servers": [server_views.format_server(req, i) for i in instances], **links_})


def get_server(req: webob.Request) -> webob.Response:
    """Show a server: status, host (admins), fault (in ERROR)."""
    instance = get_instance(req, "show")
    return util.json_response({"server": server_views.format_server(req, instance)})


def update_server(req: webob.Request) -> webob.Response:
    """Change a server's name, description (2.19), access addresses or disk config (200 with
    the server, as Nova's ``PUT /servers/{id}``)."""
    instance = get_instance(req, "update")
    schema = (schemas.UPDATE_V2_19
              if microversion.request_version(req).matches(DESCRIPTION_VERSION)
              else schemas.UPDATE)
    values = server_fields.update_values(validation.extract_body(req, schema)["server"])
    if values:
        instance = db_instances.instance_update(
            util.get_state(req).db, instance["uuid"], values)
    return util.json_response({"server": server_views.format_changed(req, instance)})


# -- create ----------------------------------------------------------------------------------


def parse_zone(req: webob.Request, value: str | None) -> tuple[str | None, str | None]:
    """``zone``, ``zone:host`` or ``zone:host:node`` -> (zone, forced host).

    :raises PolicyNotAuthorized: a host form without ``create:forced_host``.
    :raises InvalidInput: more than three parts, or a host form without a host.
    """
    if not value:
        return None, None
    if ":" not in value:
        return value, None
    parts = value.split(":")
    if len(parts) > 3 or not parts[1]:
        raise exception.InvalidInput(reason=f"Invalid availability zone format {value!r}: "
                                     "use zone, zone:host or zone:host:node")
    authorize(req, "create:forced_host")
    return parts[0] or None, parts[1]


def _check_block_devices(body: dict[str, Any]) -> None:
    """The one mapping allowed (the schema's) must name the image of ``imageRef``.

    :raises InvalidInput:
    """
    for mapping in body.get("block_device_mapping_v2", []):
        if ref_id(mapping["uuid"]) != ref_id(body["imageRef"]):
            raise exception.InvalidInput(
                reason="block_device_mapping_v2 may only map imageRef's image as the local "
                "root disk")


def lookup_image(req: webob.Request, image_ref: str) -> ImageMeta:
    """:raises InvalidInput: (400, as Nova) for an image that is missing or not active."""
    image_id = ref_id(image_ref)
    if not uuidutils.is_uuid_like(image_id):
        raise exception.InvalidInput(reason=f"Invalid imageRef provided: {image_ref!r}")
    try:
        return util.get_state(req).image_source.show(util.get_context(req), image_id)
    except exception.ImageNotFound as exc:
        raise exception.InvalidInput(reason=f"Image {image_id} could not be found.") from exc
    except exception.ImageNotAvailable as exc:
        raise exception.InvalidInput(reason=exc.message) from exc
    except exception.ImageFetchError as exc:
        raise webob.exc.HTTPServiceUnavailable(
            explanation=f"The image service could not be asked: {exc.message}") from exc


def _flavor(req: webob.Request, flavor_ref: str | int) -> db_flavors.FlavorDict:
    flavorid = ref_id(flavor_ref)
    try:
        return get_visible(req, flavorid)
    except exception.FlavorNotFound as exc:
        raise exception.InvalidInput(reason=f"Flavor {flavorid} could not be found.") from exc


def check_fits(root_gb: int, image: ImageMeta, memory_mb: int | None = None) -> None:
    """Nova's flavor checks against the image (``_validate_flavor_image_nostatus``): the
    flavor has at least the image's ``min_ram`` (``FlavorMemoryTooSmall``), and a root disk of
    ``root_gb`` (0: the image's own size, no check) holds the image and its ``min_disk``
    (``FlavorDiskSmallerThanMinDisk``, ``FlavorDiskSmallerThanImage``).

    :raises InvalidInput: (400, Nova's messages)
    """
    if memory_mb is not None and memory_mb < image.min_ram:
        raise exception.InvalidInput(
            reason="Flavor's memory is too small for requested image.")
    if root_gb and image.min_disk > root_gb:
        raise exception.InvalidInput(
            reason="Flavor's disk is smaller than the minimum size specified in image "
            f"metadata. Flavor disk is {root_gb * GiB} bytes, minimum size is "
            f"{image.min_disk * GiB} bytes.")
    needed = max(image.size or 0, image.virtual_size or 0)
    if root_gb and needed > root_gb * GiB:
        raise exception.InvalidInput(
            reason=f"Flavor's disk is too small for requested image. Flavor disk is "
            f"{root_gb * GiB} bytes, image is {needed} bytes.")


def _snapshot(flavor: db_flavors.FlavorDict) -> dict[str, Any]:
    """The flavor as the server keeps it (later changes to the flavor do not reach it)."""
    snapshot = dict(flavor)
    for key in ("is_public", "created_at", "updated_at"):
        snapshot.pop(key)
    return snapshot


def create_server(req: webob.Request) -> webob.Response:
    """Create one server, or ``min_count``..``max_count`` of them (202); they build on."""
    ctxt = util.get_context(req)
    authorize(req, "create", {"project_id": ctxt.project_id, "user_id": ctxt.user_id})
    version = microversion.request_version(req)
    schema = (schemas.CREATE_V2_37 if version.matches(NETWORKS_REQUIRED_VERSION)
              else schemas.CREATE_V2_19 if version.matches(DESCRIPTION_VERSION)
              else schemas.CREATE)
    body = validation.extract_body(req, schema)["server"]
    min_count, max_count = body.get("min_count", 1), body.get("max_count")
    max_count = max_count if max_count is not None else min_count
    if min_count > max_count:
        raise exception.InvalidInput(reason="min_count must be <= max_count")
    _check_block_devices(body)
    quota = util.get_state(req).quota.check(ctxt.project_id)
    quota.check_metadata_items(len(body.get("metadata", {})))
    zone, forced_host = parse_zone(req, body.get("availability_zone"))
    flavor = _flavor(req, body["flavorRef"])
    image = lookup_image(req, body["imageRef"])
    check_fits(flavor["root_gb"], image, flavor["memory_mb"])
    amounts = quota_usage.per_server(flavor)
    # As Nova: as many as the project's quota allows, down to min_count (403 below it).
    max_count = quota.allowed_servers(amounts, min_count, max_count)
    said = server_fields.create_values(body, image, version.matches(DESCRIPTION_VERSION))
    reservation_id = "r-" + uuidutils.generate_uuid()[:8]
    records = [
        InstanceCreate(
            uuid=uuidutils.generate_uuid(), project_id=ctxt.project_id, user_id=ctxt.user_id,
            display_name=body["name"] if max_count == 1 else f"{body['name']}-{index + 1}",
            image_ref=image.id, flavor=_snapshot(flavor), reservation_id=reservation_id,
            launch_index=index, availability_zone=zone, requested_host=forced_host, **said)
        for index in range(max_count)
    ]
    db = util.get_state(req).db
    instances = db_instances.instances_create(db, records)
    uuids = [i["uuid"] for i in instances]
    _recheck_quota(req, quota, amounts, uuids)
    cast_or_fail(req, uuids, "build", lambda api: api.build_instances(ctxt, uuids, min_count))
    if body.get("return_reservation_id"):
        return util.json_response({"reservation_id": reservation_id}, status=202)
    first = instances[0]
    return util.json_response({"server": {
        "id": first["uuid"], "links": links(req, "servers", first["uuid"]),
        "OS-DCF:diskConfig": server_views.disk_config(first),
        "adminPass": (body["adminPass"] if "adminPass" in body
                      else secrets.token_urlsafe(PASSWORD_BYTES)),
    }}, status=202)


def _recheck_quota(req: webob.Request, quota: BaseQuotaCheck, amounts: dict[str, int],
                   uuids: list[str]) -> None:
    """Nova's quota recheck: with the new servers recorded, the project must still be within
    its limits (another request may have passed the first check at the same time); if not,
    the new servers are deleted before the 403.

    :raises QuotaExceeded:
    """
    try:
        quota.recheck_servers(amounts)
    except Exception:
        db = util.get_state(req).db
        for uuid in uuids:
            db_instances.instance_update(
                db, uuid, {"vm_state": instance_states.DELETED, "terminated_at": utcnow()})
        raise


def cast_or_fail(req: webob.Request, uuids: list[str], action: str,
          send: Callable[[Any], None]) -> None:
    """Send a cast to the conductor; when it cannot be sent, the servers go to ``ERROR``."""
    try:
        send(util.get_state(req).conductor_api)
    except CAST_ERRORS as exc:
        LOG.error("Could not ask the conductor to %s %s: %s", action, uuids, exc)
        for uuid in uuids:
            try:
                db_instances.instance_update(util.get_state(req).db, uuid, {
                    "vm_state": instance_states.ERROR, "task_state": None,
                    **db_instances.fault_values(
                        f"The {action} request could not reach a conductor: {exc}", 500)})
            except exception.InstanceNotFound:
                pass


# -- delete ----------------------------------------------------------------------------------


def delete_server(req: webob.Request) -> webob.Response:
    """Delete a server (204): its disk and allocation go, then the server."""
    instance = get_instance(req, "delete")
    db = util.get_state(req).db
    uuid = instance["uuid"]
    if instance["host"] is None and instance["task_state"] is None:
        # Never got a host (failed before scheduling or placed nowhere): nothing to remove
        # anywhere, so delete it here, as Nova's local delete.
        db_instances.instance_update(
            db, uuid, {"vm_state": instance_states.DELETED, "terminated_at": utcnow()},
            expected_task_state=[None])
        return util.empty_response(204)
    # Whatever runs on it (a build, a rebuild, an earlier delete) sees this and yields; the
    # conductor's delete removes what exists when it runs.
    db_instances.instance_update(db, uuid, {"task_state": instance_states.DELETING})
    ctxt = util.get_context(req)
    cast_or_fail(req, [uuid], "delete", lambda api: api.delete_instance(ctxt, uuid))
    return util.empty_response(204)
