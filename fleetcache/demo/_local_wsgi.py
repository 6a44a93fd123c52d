"""Serve a WSGI application on 127.0.0.1 (a free port) from a thread, one thread per request
or one request at a time: the embedded default's API and Placement (``fleetcache demo``)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any
from wsgiref import simple_server

LOG = logging.getLogger(__name__)


class _QuietHandler(simple_server.WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        LOG.debug(format, *args)


class _ThreadingServer(simple_server.WSGIServer):
    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self._serve_one, args=(request, client_address),
                                  daemon=True)
        thread.start()

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)


@contextlib.contextmanager
def serve(app: Any, name: str, threaded: bool = True) -> Iterator[str]:
    """Serve ``app`` until the block ends; yields ``http://127.0.0.1:<port>``.

    :param threaded: a thread per request; else one request at a time (an app on SQLite).
    """
    server_class = _ThreadingServer if threaded else simple_server.WSGIServer
    server = simple_server.make_server("127.0.0.1", 0, app, server_class=server_class,
                                       handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
