"""Compute API microversions: the canonical list, header parsing and version dispatch.

A request names its version in ``OpenStack-API-Version: compute 2.81`` or in the legacy
``X-OpenStack-Nova-API-Version: 2.81``; without either it is 2.1, and ``latest`` is the maximum.
A version out of range is refused with 406, as Nova does.

Every minor version between the minimum and the maximum is accepted, as in Nova: those not
listed in :data:`VERSIONS` behave like the nearest listed version below them. The user-facing
history is ``rest_api_version_history.md`` beside this module.

fleetcache's own additions have their own axis in the same header, service type
``fleetcache`` (:data:`EXTENSION_VERSIONS`): every compute number above 2.81 is Nova's, so a
fleetcache change cannot take one. A request names both as ``OpenStack-API-Version: compute
2.81, fleetcache 1.1``; without the second it is fleetcache 1.0, and only a request that
named it gets it echoed (Nova's clients and Tempest see exactly Nova's headers)::

    version = microversion.extension_version(req)   # Version(1, 0) unless asked
    if version.matches(microversion.EXTENSION_TERMS): ...
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import webob
import webob.exc

from fleetcache.api import fault, util

SERVICE_TYPE = "compute"
HEADER = "OpenStack-API-Version"
LEGACY_HEADER = "X-OpenStack-Nova-API-Version"
#: Where the middleware leaves the request's version in the WSGI environ.
ENVIRON_KEY = "fleetcache.microversion"

#: The versions where the API changed, oldest first; the first is the minimum, the last the
#: maximum. Add a line (and a section in rest_api_version_history.md) for every change.
VERSIONS = [
    "2.1",  # The base: os-aggregates CRUD and actions, os-services list.
    "2.7",  # flavor access: addTenantAccess to a public flavor is a 409.
    "2.11",  # os-services: each service shows "forced_down".
    "2.19",  # servers: a "description" (create, PUT, shown).
    "2.28",  # os-hypervisors/detail: "cpu_info" is an object, not its JSON text.
    "2.33",  # os-hypervisors: "limit" and "marker" page the list.
    "2.36",  # limits, os-quota-sets: nova-network's quotas are gone.
    "2.37",  # POST /servers: "networks" is required ("none" or "auto").
    "2.38",  # GET /servers?status=: a status Nova does not know is 400, not an empty list.
    "2.39",  # limits: maxImageMeta is gone.
    "2.41",  # os-aggregates: each aggregate shows its "uuid".
    "2.47",  # servers: the flavor is shown embedded (name, resources, extra specs).
    "2.53",  # os-services, os-hypervisors: uuid ids; hypervisor pattern and with_servers;
    #          the hypervisor search and servers routes end.
    "2.55",  # flavors: a description (create, show, PUT /flavors/{id}).
    "2.57",  # limits, os-quota-sets: the file injection quotas are gone.
    "2.61",  # flavors: each flavor shows its "extra_specs".
    "2.75",  # flavors: "swap" is 0 rather than ""; limits, os-quota-sets: unknown query: 400;
    #          hypervisors asked with_servers show an empty list; servers: PUT and rebuild
    #          answer it all.
    "2.81",  # POST /os-aggregates/{id}/images pre-caches images; the images/jobs resource.
]

#: At most 9 digits a number: int() refuses strings of over 4,300 digits with ValueError
#: (CPython's limit since 3.11), which a header of that length turned into a 500.
_VERSION_RE = re.compile(r"^([1-9]\d{0,8})\.([1-9]\d{0,8}|0)$")
#: Characters of a malformed version string quoted back in the error.
_QUOTED = 32


class Version(NamedTuple):
    """A microversion; tuples compare the way versions do."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def matches(
        self, min_version: Version | None = None, max_version: Version | None = None
    ) -> bool:
        """True when ``min_version <= self <= max_version`` (a missing bound is open)."""
        if min_version is not None and self < min_version:
            return False
        return max_version is None or self <= max_version


def parse_version_string(text: str) -> Version:
    """:raises webob.exc.HTTPBadRequest: when ``text`` is not ``MajorNum.MinorNum``."""
    match = _VERSION_RE.match(text.strip())
    if match is None:
        raise webob.exc.HTTPBadRequest(
            explanation=f"API Version String {_quoted(text)} is of invalid format. "
            "Must be of format MajorNum.MinorNum (at most 9 digits each)."
        )
    return Version(int(match.group(1)), int(match.group(2)))


def _quoted(text: str) -> str:
    return text if len(text) <= _QUOTED else f"{text[:_QUOTED]}... ({len(text)} characters)"


MIN_VERSION = parse_version_string(VERSIONS[0])
MAX_VERSION = parse_version_string(VERSIONS[-1])


#: fleetcache's own axis: the service type in ``OpenStack-API-Version`` and its versions,
#: one comment per version (a section each in rest_api_version_history.md).
EXTENSION_SERVICE_TYPE = "fleetcache"
EXTENSION_VERSIONS = [
    "1.0",  # What compute 2.81 serves: the images/jobs resource, fleetcache:pin_seconds.
    "1.1",  # A pre-cache request's terms (fleetcache:not_before, window, deadline, limits,
    #         priority: fleetcache.common.job_terms); a job shows terms and next_start_at.
]
EXTENSION_ENVIRON_KEY = "fleetcache.extension_version"
EXTENSION_MIN_VERSION = parse_version_string(EXTENSION_VERSIONS[0])
EXTENSION_MAX_VERSION = parse_version_string(EXTENSION_VERSIONS[-1])
#: From this fleetcache version a pre-cache request may carry its terms.
EXTENSION_TERMS = Version(1, 1)


def _requested(headers: Any, service_type: str = SERVICE_TYPE) -> str | None:
    # Several services may share the header: "compute 2.81, fleetcache 1.1"; a client may
    # also send it as several header lines, which WSGI joins with commas.
    for item in (headers.get(HEADER) or "").split(","):
        parts = item.strip().split()
        if len(parts) == 2 and parts[0].lower() == service_type:
            return str(parts[1])
    if service_type != SERVICE_TYPE:
        return None
    legacy = headers.get(LEGACY_HEADER)
    return str(legacy) if legacy else None


def _in_range(text: str, low: Version, high: Version, service_type: str) -> Version:
    if text.strip().lower() == "latest":
        return high
    version = parse_version_string(text)
    if not version.matches(low, high):
        raise webob.exc.HTTPNotAcceptable(
            # Nova's message for compute; the other axis says which it is.
            explanation=f"Version {'' if service_type == SERVICE_TYPE else service_type + ' '}"
            f"{version} is not supported by the API. "
            f"Minimum is {low} and maximum is {high}."
        )
    return version


def extract_version(headers: Any) -> Version:
    """The compute version a request asks for.

    :raises webob.exc.HTTPBadRequest: for a malformed version string.
    :raises webob.exc.HTTPNotAcceptable: for a version outside ``[MIN_VERSION, MAX_VERSION]``.
    """
    text = _requested(headers)
    if text is None:
        return MIN_VERSION
    return _in_range(text, MIN_VERSION, MAX_VERSION, SERVICE_TYPE)


def extract_extension_version(headers: Any) -> Version | None:
    """The fleetcache version a request asks for; ``None`` when it names none.

    :raises webob.exc.HTTPBadRequest: for a malformed version string.
    :raises webob.exc.HTTPNotAcceptable: for a version outside
        ``[EXTENSION_MIN_VERSION, EXTENSION_MAX_VERSION]``.
    """
    text = _requested(headers, EXTENSION_SERVICE_TYPE)
    if text is None:
        return None
    return _in_range(text, EXTENSION_MIN_VERSION, EXTENSION_MAX_VERSION,
                     EXTENSION_SERVICE_TYPE)


def request_version(req: webob.Request) -> Version:
    """The version the microversion middleware stored for ``req`` (2.1 when none did)."""
    version: Version = req.environ.get(ENVIRON_KEY, MIN_VERSION)
    return version


def extension_version(req: webob.Request) -> Version:
    """The fleetcache version of ``req`` (1.0 when it named none)."""
    version: Version | None = req.environ.get(EXTENSION_ENVIRON_KEY)
    return version or EXTENSION_MIN_VERSION


class MicroversionMiddleware(util.Middleware):
    """Parses the request's versions and echoes them in the response, as Nova does; the
    fleetcache one only when the request named it."""

    def process(self, req: webob.Request) -> webob.Response:
        try:
            req.environ[ENVIRON_KEY] = extract_version(req.headers)
            req.environ[EXTENSION_ENVIRON_KEY] = extract_extension_version(req.headers)
        except webob.exc.HTTPException as exc:
            return fault.from_http_error(exc)
        response = self.forward(req)
        version = str(req.environ[ENVIRON_KEY])
        response.headers[HEADER] = f"{SERVICE_TYPE} {version}"
        response.headers[LEGACY_HEADER] = version
        extension = req.environ[EXTENSION_ENVIRON_KEY]
        if extension is not None:
            response.headers.add(HEADER, f"{EXTENSION_SERVICE_TYPE} {extension}")
        response.headers.add("Vary", f"{HEADER}, {LEGACY_HEADER}")
        return response


Handler = Callable[[webob.Request], webob.Response]


def version_handler(min_ver: str, max_ver: str | None = None) -> Callable[[Handler], Handler]:
    """Serve the decorated handler only at versions in ``[min_ver, max_ver]``.

    Outside that range the route answers 404, as a route that does not exist (Nova's
    behaviour for ``POST /os-aggregates/{id}/images`` below 2.81).
    """
    low = parse_version_string(min_ver)
    high = parse_version_string(max_ver) if max_ver else None

    def decorator(func: Handler) -> Handler:
        @functools.wraps(func)
        def wrapper(req: webob.Request) -> webob.Response:
            if not request_version(req).matches(low, high):
                raise webob.exc.HTTPNotFound(explanation="The resource could not be found.")
            return func(req)

        wrapper.min_version = low  # type: ignore[attr-defined]
        wrapper.max_version = high  # type: ignore[attr-defined]
        return wrapper

    return decorator
