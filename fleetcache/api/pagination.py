"""Nova's paging of lists: ``limit`` and ``marker`` in the query, a ``*_links`` next link.

As nova/api/openstack/common.py: ``limit`` is a non-negative integer (at most
:data:`MAX_LIMIT` items come back whatever it says), ``marker`` the id of the last item the
client has; the page starts after it. A marker that names no item of the list is a 400
(``marker [x] not found``). When a page is full, the answer carries a ``next`` link whose
marker is the page's last item, as Nova's ``_get_collection_links``::

    limit, marker = pagination.limit_and_marker(req)
    later = pagination.after_marker(flavors, key, marker)  # before the filters, as Nova
    page = [f for f in later if wanted(f)][:limit]
    body = {"flavors": [...], **pagination.links(req, "flavors", page, limit, key)}
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import webob

from fleetcache.api import util
from fleetcache.common import exception

#: Nova's ``[api] max_limit`` default: the most items one answer holds.
MAX_LIMIT = 1000
#: Longest ``limit`` text read as a number (int() of a very long text is slow, then refused).
_MAX_DIGITS = 18

T = TypeVar("T")


def _int_param(req: webob.Request, name: str) -> int | None:
    raw = req.GET.get(name)
    if raw is None:
        return None
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > _MAX_DIGITS:
        if text.startswith("-") and text[1:].isascii() and text[1:].isdigit():
            raise exception.InvalidInput(f"{name} param must be positive")
        raise exception.InvalidInput(f"{name} param must be an integer")
    return int(text)


def limit_and_marker(req: webob.Request) -> tuple[int, str | None]:
    """The request's page size (at most :data:`MAX_LIMIT`) and marker.

    :raises InvalidInput: (400, Nova's messages) for a ``limit`` that is not a non-negative
        integer.
    """
    limit = _int_param(req, "limit")
    marker = req.GET.get("marker")
    return min(MAX_LIMIT, MAX_LIMIT if limit is None else limit), marker


def after_marker(items: Sequence[T], key: Callable[[T], str], marker: str | None) -> list[T]:
    """The items after the one whose ``key`` is ``marker`` (all of them without a marker).

    Nova looks the marker up among everything the caller may see, before the list's filters:
    so do the callers, which filter what this returns.

    :raises InvalidInput: (400) when no item has the key ``marker``.
    """
    if marker is None:
        return list(items)
    for index, item in enumerate(items):
        if key(item) == marker:
            return list(items[index + 1:])
    raise exception.InvalidInput(f"marker [{marker}] not found")


def links(req: webob.Request, collection: str, items: Sequence[T], limit: int,
          key: Callable[[T], str]) -> dict[str, Any]:
    """``{"<collection>_links": [next]}`` when the page is full (Nova), else ``{}``."""
    if not items or len(items) < limit:
        return {}
    params = [(k, v) for k, v in req.GET.items() if k != "marker"]
    params.append(("marker", key(items[-1])))
    href = f"{util.base_url(req)}{req.path_info}?{urllib.parse.urlencode(params)}"
    return {f"{collection}_links": [{"rel": "next", "href": href}]}
