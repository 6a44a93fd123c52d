"""Gunicorn settings of the local stack's Glance (``tools/stack.sh``, ``gunicorn -c``).

Gunicorn's access log writes a line when a response ends, with that moment to the second
(``%(t)s``) and the request's duration (``%(L)s``), but no start: two downloads that overlap
by less than a second cannot be told from two that follow each other. This hook stamps every
request, as it starts, with a header the access format prints (``%({x-fleetcache-started}i)s``,
epoch seconds to the microsecond), so the integration tests can tell how many image downloads
Glance served at once (``tests/integration/test_origin_protection.py``). Gunicorn appends the
header after the client's, and the log takes the last one, so a client cannot forge it.
"""

import time


def pre_request(worker, req):  # noqa: ANN001, ANN201 - gunicorn's hook signature
    req.headers.append(("X-FLEETCACHE-STARTED", f"{time.time():.6f}"))
