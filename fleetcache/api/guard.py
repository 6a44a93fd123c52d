"""What every request must be before anything else reads it: size, path, media type, body.

Two middlewares, just inside the fault wrapper (so that each refusal is a Nova fault with a
request id and a log line):

* :class:`BodySizeLimit`: oslo.middleware's ``sizelimit`` with ``[oslo_middleware]
  max_request_body_size`` (114,688 bytes, as Nova): a larger body is 413 ``overLimit``, whether
  its ``Content-Length`` says so or a chunked body grows past it;
* :class:`RequestGuard`: a path or a query string that is not UTF-8, or that holds a NUL
  character, is 400 (Nova's ``badRequest``); a body whose ``Content-Type`` is not
  JSON is 415 ``badMediaType`` (as Nova: no type, an empty one or ``text/plain`` are read as
  JSON); the body is read in full here, once, and a body that stops short of its
  ``Content-Length`` is 408. How long a client may take to send it is bounded by the server
  (``fleetcache.cmd.api_worker``), not here.

JSON decoding itself (depth, lone surrogates) is ``util.read_json``.
"""

from __future__ import annotations

from typing import Any

import webob
from oslo_config import cfg
from oslo_middleware import sizelimit

from fleetcache.api import fault, util

#: Media types a body may be declared as (Nova's ``get_supported_content_types``), and those
#: Nova reads as JSON too because some WSGI servers default to them.
JSON_MEDIA_TYPES = frozenset({"application/json", "application/vnd.openstack.compute+json"})
DEFAULT_MEDIA_TYPES = frozenset({"", "text/plain"})
#: NUL is valid UTF-8 but no id, name or filter holds it, and PostgreSQL refuses it in any text
#: parameter (the driver raises before the query is sent: a 500 otherwise).
NUL_MESSAGE = "The request {where} holds a NUL character (%00), which no value may hold."


class BodySizeLimit(util.Middleware):
    """oslo.middleware's body size limit, answering with the limit in the fault message.

    (oslo.middleware 8.2's own 413 text carries an unformatted ``%s``.)
    """

    def __init__(self, application: Any, conf: cfg.ConfigOpts) -> None:
        super().__init__(sizelimit.RequestBodySizeLimiter(application, conf))
        self.limit = int(conf.oslo_middleware.max_request_body_size)

    def process(self, req: webob.Request) -> webob.Response:
        response = self.forward(req)
        if response.status_code == 413 and response.content_type != util.JSON:
            return fault.fault_response(
                413, f"Request is too large: the body may hold at most {self.limit} bytes."
            )
        return response


class RequestGuard(util.Middleware):
    """Refuses what no handler can read: a path or query that is not UTF-8 text, a non-JSON
    body, a short body."""

    def process(self, req: webob.Request) -> webob.Response:
        error = (_path_error(req) or _query_error(req) or _media_type_error(req)
                 or _read_body(req))
        if error is not None:
            return error
        return self.forward(req)


def _path_error(req: webob.Request) -> webob.Response | None:
    # PEP 3333: the path is the raw bytes as latin-1 text; webob decodes it as UTF-8 later.
    raw = req.environ.get("SCRIPT_NAME", "") + req.environ.get("PATH_INFO", "")
    try:
        path = raw.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return fault.fault_response(400, "The request path is not valid UTF-8.")
    if "\x00" in path:
        return fault.fault_response(400, NUL_MESSAGE.format(where="path"))
    return None


def _query_error(req: webob.Request) -> webob.Response | None:
    """The query string must decode, every name and value, as UTF-8 text without NUL.

    Every handler that reads its query does so through ``req.GET``, which raises
    ``UnicodeDecodeError`` on ``?x=%ff``: parsing it here, once (webob keeps the result in the
    environ for the handler), turns that into one 400 for every route.
    """
    if not req.environ.get("QUERY_STRING"):
        return None
    try:
        items = req.GET.items()
    except UnicodeError:
        return fault.fault_response(400, "The query string is not valid UTF-8.")
    if any("\x00" in name or "\x00" in value for name, value in items):
        return fault.fault_response(400, NUL_MESSAGE.format(where="query string"))
    return None


def _has_body(req: webob.Request) -> bool:
    return bool(req.content_length) or "chunked" in req.headers.get("Transfer-Encoding", "")


def _media_type_error(req: webob.Request) -> webob.Response | None:
    if not _has_body(req):
        return None
    media_type = (req.content_type or "").lower()
    if media_type in JSON_MEDIA_TYPES or media_type in DEFAULT_MEDIA_TYPES:
        return None
    return fault.fault_response(
        415, f"Invalid content type {media_type}: request bodies are application/json."
    )


def _read_body(req: webob.Request) -> webob.Response | None:
    """Reads the body into the request (later readers get it from memory), or refuses it."""
    if not _has_body(req):
        return None
    try:
        req.body  # noqa: B018 - webob keeps what it read, seekable, in the environ
    except OSError:
        # webob's DisconnectionError or gunicorn's NoMoreData: fewer bytes than announced,
        # because the client stopped sending or the server cut it off at its read deadline.
        return fault.fault_response(408, "The request body did not arrive in full.")
    return None
