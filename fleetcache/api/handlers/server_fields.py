"""What a server's owner says of it, from a request body to the instance's columns, as Nova
keeps it (nova/api/openstack/compute/servers.py ``create`` and ``update``, helpers.py
``translate_attributes``, compute/api.py ``_inherit_properties_from_image``):

* ``description`` (2.19): kept as given, ``null`` for none; below 2.19 Nova stores the
  server's name as its description, so a server made then shows its name from 2.19 on;
* ``accessIPv4``/``accessIPv6``: kept in canonical form (``0000::babe:220.12.22.2`` is
  ``::babe:dc0c:1602``, RFC 5952, as Nova's ``IPAddress`` column type stores it);
* ``OS-DCF:diskConfig``: ``AUTO`` or ``MANUAL``; when a create does not say, the image's
  ``auto_disk_config`` property decides, and ``AUTO`` on an image whose property is
  ``disabled`` is a 400;
* ``metadata``: the keys and values (the schema holds them to Nova's lengths).

The request schemas (:mod:`fleetcache.api.schemas.servers`) have already validated the body.
"""

from __future__ import annotations

import ipaddress
from typing import Any, TypedDict

from oslo_utils import strutils

from fleetcache.common import exception
from fleetcache.image.source import ImageMeta

#: The image property that sets a server's disk config when the create does not.
IMAGE_DISK_CONFIG = "auto_disk_config"


class ServerFields(TypedDict):
    """The instance columns a create fills from what the owner said."""

    display_description: str | None
    access_ip_v4: str | None
    access_ip_v6: str | None
    auto_disk_config: bool
    metadata: dict[str, str]


def canonical_ip(address: str | None) -> str | None:
    """An IPv4 or IPv6 address in canonical form (``None`` stays ``None``)."""
    return None if address is None else str(ipaddress.ip_address(address))


def _asked_disk_config(body: dict[str, Any]) -> bool | None:
    """``OS-DCF:diskConfig`` as ``auto_disk_config``; ``None`` when not given."""
    value = body.get("OS-DCF:diskConfig")
    return None if value is None else value == "AUTO"


def auto_disk_config(asked: bool | None, image: ImageMeta) -> bool:
    """What a create's server keeps: ``asked``, else the image's property.

    :raises InvalidInput: (400, Nova's ``AutoDiskConfigDisabledByImage``) for ``AUTO`` on an
        image whose ``auto_disk_config`` is ``disabled``.
    """
    prop = image.properties.get(IMAGE_DISK_CONFIG)
    disabled = isinstance(prop, str) and prop.strip().lower() == "disabled"
    if asked and disabled:
        raise exception.InvalidInput(
            reason=f"Requested image {image.id} has automatic disk resize disabled.")
    if asked is None:
        return strutils.bool_from_string(prop)
    return asked


def create_values(body: dict[str, Any], image: ImageMeta,
                  description_supported: bool) -> ServerFields:
    """The columns a create's servers get from its validated ``server`` body.

    :param description_supported: the request's version is 2.19 or later; below it the
        description is the name, as Nova stores it.
    :raises InvalidInput: see :func:`auto_disk_config`.
    """
    return ServerFields(
        display_description=(body.get("description") if description_supported
                             else body["name"]),
        access_ip_v4=canonical_ip(body.get("accessIPv4")),
        access_ip_v6=canonical_ip(body.get("accessIPv6")),
        auto_disk_config=auto_disk_config(_asked_disk_config(body), image),
        metadata=dict(body.get("metadata") or {}),
    )


#: ``PUT /servers/{id}``: request field -> instance column.
_UPDATE_COLUMNS = {"name": "display_name", "description": "display_description",
                   "accessIPv4": "access_ip_v4", "accessIPv6": "access_ip_v6"}


def update_values(body: dict[str, Any]) -> dict[str, Any]:
    """The columns a ``PUT /servers/{id}`` changes (its validated ``server`` body); a
    ``null`` description removes it. Nova does not consult the image here."""
    values: dict[str, Any] = {}
    for field, column in _UPDATE_COLUMNS.items():
        if field in body:
            values[column] = body[field]
    for column in ("access_ip_v4", "access_ip_v6"):
        if column in values:
            values[column] = canonical_ip(values[column])
    asked = _asked_disk_config(body)
    if asked is not None:
        values["auto_disk_config"] = asked
    return values
