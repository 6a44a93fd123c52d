"""Image look-ups by id, so the clients can resolve images without a separate image endpoint.

A fleetcache addition (Nova's image proxy went away at 2.36; these answer at every version).
With ``OS_AUTH_TYPE=none`` every service type resolves to the one endpoint, so both clients
send image look-ups to the compute endpoint (observed with python-openstackclient 10.5.0 on
openstacksdk 4.22.0, and python-novaclient 18.13.1; see docs/api.md):

* ``openstack``: ``GET /v2.1/images/{id}``, then ``GET /v2.1/images?name=...``; it looks up
  every argument, ids included, and takes the id from the request, not from the body;
* ``nova``: ``GET /v2.1/v2/images?id=in:A,B`` and ``GET /v2.1/v2/images?names=in:A,B``
  (always both); every argument must come back as an id or a name, and an image it did not
  ask for fails the command.

Images are looked up through the configured image source (``[image_source] backend``), which
knows images by id only: name look-ups find nothing.
"""

from __future__ import annotations

from typing import Any

import webob
from oslo_utils import uuidutils

from fleetcache.api import policy, util
from fleetcache.api.policies import images as policies
from fleetcache.common import exception


def _show(req: webob.Request, image_id: str) -> dict[str, Any] | None:
    """The image's Glance v2 body, or ``None`` when the source does not have it usable."""
    if not uuidutils.is_uuid_like(image_id):
        return None
    try:
        meta = util.get_state(req).image_source.show(util.get_context(req), image_id)
    except (exception.ImageNotFound, exception.ImageNotAvailable):
        return None
    body = meta.to_dict()
    body.pop("locations", None)
    body.pop("direct_url", None)
    return body


def _authorize(req: webob.Request) -> None:
    policy.authorize(util.get_state(req).enforcer, util.get_context(req), policies.SHOW)


def get_image(req: webob.Request) -> webob.Response:
    """Show an image by id (Glance v2 fields, wrapped as Nova's image proxy did)."""
    _authorize(req)
    image_id = req.urlvars["image_id"]
    body = _show(req, image_id)
    if body is None:
        raise exception.ImageNotFound(image_id=image_id)
    return util.json_response({"image": body})


def list_images(req: webob.Request) -> webob.Response:
    """Find images by id: ``?id=in:A,B`` (nova) or ``?id=A``; name filters find nothing."""
    _authorize(req)
    wanted: list[str] = []
    for value in req.GET.getall("id"):
        wanted += [i for i in value.removeprefix("in:").split(",") if i]
    found = [body for body in (_show(req, i) for i in dict.fromkeys(wanted)) if body]
    return util.json_response({"images": found})
