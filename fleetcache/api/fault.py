"""Errors as Nova renders them: ``{"itemNotFound": {"message": ..., "code": 404}}``.

:class:`FaultWrapper` is the one place where an exception becomes an HTTP response: a
:class:`~fleetcache.common.exception.FleetcacheException` by its ``code``, a ``webob.exc``
error by its status, anything else as a 500 ``computeFault`` (logged with its traceback).
Each body also carries the stable ``error_code`` string of the fleetcache exception
(``fleetcache.aggregate.not_found``); clients that only know Nova ignore it.
"""

from __future__ import annotations

from typing import Any

import webob
import webob.exc
from oslo_log import log as logging
from oslo_serialization import jsonutils

from fleetcache.api import util
from fleetcache.common import exception

LOG = logging.getLogger(__name__)

#: Nova's fault names by status (nova/api/openstack/wsgi.py ``Fault._fault_names``).
FAULT_NAMES = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    405: "badMethod",
    408: "requestTimeout",  # not Nova's (Nova never answers 408): the client sent too slowly
    409: "conflictingRequest",
    413: "overLimit",
    415: "badMediaType",
    429: "overLimit",
    501: "notImplemented",
    503: "serviceUnavailable",
}
DEFAULT_FAULT_NAME = "computeFault"
#: WSGI environ key a middleware sets when its error response is a page for a browser (the
#: status page's sign-in form, a 401 in HTML) that must reach the client as it is.
KEEP_ERROR_PAGE = "fleetcache.fault.keep_error_page"
#: error_code for errors that do not come from a fleetcache exception.
GENERIC_ERROR_CODES = {
    400: "fleetcache.invalid",
    401: "fleetcache.unauthorized",
    403: "fleetcache.forbidden",
    404: "fleetcache.not_found",
    405: "fleetcache.method_not_allowed",
    406: "fleetcache.microversion.not_acceptable",
    408: "fleetcache.request_timeout",
    409: "fleetcache.conflict",
    413: "fleetcache.request_too_large",
    415: "fleetcache.media_type",
    503: "fleetcache.service_unavailable",
}


def fault_response(
    status: int, message: str, error_code: str | None = None, headers: Any = None
) -> webob.Response:
    """A JSON response with Nova's fault body for ``status``."""
    name = FAULT_NAMES.get(status, DEFAULT_FAULT_NAME)
    fault = {
        "message": message,
        "code": status,
        "error_code": error_code or GENERIC_ERROR_CODES.get(status, "fleetcache.error"),
    }
    response = webob.Response(status=status, content_type="application/json", charset="UTF-8")
    for key, value in (headers or {}).items():
        response.headers[key] = value
    response.text = jsonutils.dumps({name: fault})
    return response


def from_http_error(error: webob.exc.HTTPException) -> webob.Response:
    """A Nova fault response for a ``webob.exc`` error raised or returned by a handler."""
    status = int(error.status_code)
    message = error.explanation or error.title
    if error.detail:
        message = str(error.detail)
    headers = {}
    if status == 405 and error.headers.get("Allow"):
        headers["Allow"] = error.headers["Allow"]
    return fault_response(status, message, headers=headers)


class FaultWrapper(util.Middleware):
    """Turns every exception raised below it into a Nova fault response."""

    def process(self, req: webob.Request) -> webob.Response:
        try:
            response = self.forward(req)
        except exception.FleetcacheException as exc:
            if exc.code >= 500:
                LOG.error("%s %s failed: %s", req.method, util.request_path(req), exc)
            return fault_response(exc.code, exc.message, exc.error_code)
        except webob.exc.HTTPException as exc:
            return from_http_error(exc)
        except Exception:
            LOG.exception("Unexpected error serving %s %s", req.method, util.request_path(req))
            return fault_response(
                500,
                "Unexpected API Error. Please report this at the fleetcache bug tracker and "
                "attach the fleetcache-api log if possible.",
            )
        if (response.status_code >= 400 and response.content_type != "application/json"
                and not req.environ.get(KEEP_ERROR_PAGE)):
            # A webob.exc error returned rather than raised, or a bare error from a middleware.
            return fault_response(response.status_code, _plain_message(response))
        return response


def _plain_message(response: webob.Response) -> str:
    text = response.text.strip() if response.charset else ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # webob's plain-text error pages read "<status>\n\n<explanation>".
    return lines[-1] if lines else response.status.split(" ", 1)[-1]
